package report

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Reasons of the Ready condition.
const (
	ReasonReconciled          = "Reconciled"
	ReasonCompileFailed       = "CompileFailed"
	ReasonMatchFailed         = "MatchFailed"
	ReasonEvaluationFailed    = "EvaluationFailed"
	ReasonApplyFailed         = "ApplyFailed"
	ReasonNotOwned            = "NotOwned"
	ReasonPruneFailed         = "PruneFailed"
	ReasonUnobservableTrigger = "UnobservableTrigger"
	// ReasonInvalidServiceAccount: the account the policy names, or the
	// default one, is not one it may run as.
	ReasonInvalidServiceAccount = "InvalidServiceAccount"
	// ReasonRefused: the policy generates objects Sprout must not write.
	ReasonRefused = "Refused"
	// ReasonSuspended: the policy is suspended.
	ReasonSuspended = "Suspended"
	// ReasonProgressing: a new generation of the policy is being applied;
	// also the reason of the Reconciling condition that says so.
	ReasonProgressing = "Progressing"
	// ReasonProgressingWithRetry: the last sync failed and is retried.
	ReasonProgressingWithRetry = "ProgressingWithRetry"
	// ReasonBlastRadiusExceeded: a new revision of the policy would delete
	// or overwrite more of its objects than its blast radius allows; those
	// writes wait for an approval of the revision.
	ReasonBlastRadiusExceeded = "BlastRadiusExceeded"
)

// Outcome is what one sync found, for the policy's status.
type Outcome struct {
	Reason   string // empty when all went well
	Err      error
	Triggers int
	Objects  int
	// Failed counts the triggers that failed: their match, their
	// evaluation, or a refusal of what they generate.
	Failed int
	// Granted is the RBACPermissionsGranted verdict; nil leaves the
	// condition as it was.
	Granted *Verdict
}

// Verdict is a sync's permission verdict: nil Err when every permission
// the policy needs is granted.
type Verdict struct{ Err error }

// Counted reports whether the sync got as far as counting triggers and
// objects: a policy that does not compile, or names an account it may not
// run as, keeps the counts its last sync wrote.
func (o Outcome) Counted() bool {
	switch o.Reason {
	case ReasonCompileFailed, ReasonInvalidServiceAccount, ReasonSuspended, ReasonProgressing:
		return false
	}
	return true
}

// Summary is what of an outcome is written at once when it changes: a
// change of counts alone may wait.
func (o Outcome) Summary() string {
	s := o.Reason
	if o.Err != nil {
		s += ": " + o.Err.Error()
	}
	if o.Granted != nil {
		s += "; " + VerdictMessage(o.Granted.Err)
	}
	return s
}

// PerTrigger reports whether a sync failed for some triggers, not for the
// policy: the others were generated and pruned.
func (o Outcome) PerTrigger() bool {
	switch o.Reason {
	case ReasonEvaluationFailed, ReasonMatchFailed, ReasonRefused:
		return o.Failed > 0
	}
	return false
}

// A Stalling error says whether a retry alone may cure it (Stalls false:
// the API server's discovery was down) or not (Stalls true: a permission
// the policy lacks).
type Stalling interface {
	error
	Stalls() bool
}

// Stalled reports whether a failed sync cannot progress by being retried:
// Sprout does not retry it, and only a change to the policy, to RBAC or to
// the objects in its way lifts it. Every such change queues the policy.
func (o Outcome) Stalled() bool {
	switch o.Reason {
	case ReasonCompileFailed, ReasonInvalidServiceAccount, ReasonRefused, ReasonNotOwned, ReasonUnobservableTrigger, ReasonSuspended,
		ReasonBlastRadiusExceeded:
		return true
	case ReasonMatchFailed:
		if stalls, transient := stallings(o.Err); stalls && !transient {
			return true
		}
	}
	// A write or delete refused: a missing permission, or an account Sprout
	// may not impersonate. Retrying alone cannot fix it.
	return o.Err != nil && apierrors.IsForbidden(o.Err)
}

// stallings reports whether err's tree holds a Stalling error that stalls,
// and one that does not.
func stallings(err error) (stalls, transient bool) {
	if err == nil {
		return false, false
	}
	if s, ok := err.(Stalling); ok {
		if s.Stalls() {
			stalls = true
		} else {
			transient = true
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			a, b := stallings(e)
			stalls, transient = stalls || a, transient || b
		}
	case interface{ Unwrap() error }:
		a, b := stallings(u.Unwrap())
		stalls, transient = stalls || a, transient || b
	}
	return stalls, transient
}
