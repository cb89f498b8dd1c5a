package reconcile

import (
	"errors"

	fluxmeta "github.com/fluxcd/pkg/apis/meta"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/reconcile/blast"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// AnnotationSuspend set to "true" on a policy suspends it, as
// `flux suspend` does a Flux object: it writes and prunes nothing until the
// annotation goes, and says so in its status. An annotation, not a field,
// so that Kyverno's schema stays untouched.
const AnnotationSuspend = "sprout.dev/suspend"

// AnnotationReconcileRequest is Flux's reconcile.fluxcd.io/requestedAt: a
// new value makes a full sync of the policy now, and the policy's record
// (PolicyInventory status.lastHandledReconcileAt) says when it is done.
const AnnotationReconcileRequest = fluxmeta.ReconcileRequestAnnotation

// ReasonSuspended is the reason of a suspended policy's conditions.
const ReasonSuspended = report.ReasonSuspended

// errSuspended is a suspended policy's outcome.
var errSuspended = errors.New("suspended by the annotation " + AnnotationSuspend + `: "true"; nothing is written or pruned until it is removed`)

// suspended reports whether p is suspended. Only "true" suspends, as in
// Flux's spec.suspend: a typo must not stop a policy silently.
func suspended(p apiv1.Policy) bool {
	return p.GetAnnotations()[AnnotationSuspend] == "true"
}

// reconcileRequest is p's reconcile request token, empty when it has none.
func reconcileRequest(p apiv1.Policy) string {
	return p.GetAnnotations()[AnnotationReconcileRequest]
}

// dayTwoChanged handles what changed on a policy between two copies of the
// same generation that a sync must act on: a suspension lifted or set, or
// a new reconcile request, which also makes the next sync compare every
// object in full and ask discovery again, as a scheduled resync does. It
// reports whether the policy must be queued.
func (c *Controller) dayTwoChanged(key policy.Key, was, now apiv1.Policy) bool {
	request := reconcileRequest(now)
	requested := request != "" && request != reconcileRequest(was)
	if requested {
		c.intake.downstreamChanged(key)
		c.kinds.Reset()
	}
	// An approval, or a new threshold, may release what a revision held.
	guarded := was.GetAnnotations()[blast.AnnotationApprovedRevision] != now.GetAnnotations()[blast.AnnotationApprovedRevision] ||
		was.GetAnnotations()[blast.AnnotationBlastRadius] != now.GetAnnotations()[blast.AnnotationBlastRadius]
	return requested || guarded || suspended(was) != suspended(now)
}
