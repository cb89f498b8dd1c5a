package report

import (
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// ConditionReady is the condition that summarises a policy.
const ConditionReady = "Ready"

// The conditions kstatus reads beside Ready (github.com/fluxcd/cli-utils,
// pkg/kstatus): Flux's health checks, `kubectl wait` and Flux's own
// controllers tell from them whether a policy is done, on its way, or stuck.
const (
	// ConditionReconciling is True while a change is being applied, and
	// while a failure that a retry may cure is being retried.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the policy cannot progress until it,
	// its account's rights or the objects in its way change: a Flux
	// Kustomization applying it then fails at once instead of timing out.
	ConditionStalled = "Stalled"
)

// ConditionRBACPermissionsGranted is Kyverno's condition, in
// status.conditionStatus, saying whether the policy has the permissions it
// needs. Its reasons and messages are Kyverno's, so that tools waiting on
// it work unchanged.
const ConditionRBACPermissionsGranted = "RBACPermissionsGranted"

const (
	reasonSucceeded = "Succeeded"
	reasonFailed    = "Failed"
	// MessagePermissionsGranted is the message of a true
	// RBACPermissionsGranted, Kyverno's.
	MessagePermissionsGranted = "Policy is ready for reporting."
)

// VerdictMessage is the message of the RBACPermissionsGranted condition a
// verdict gives.
func VerdictMessage(err error) string {
	if err == nil {
		return MessagePermissionsGranted
	}
	return err.Error()
}

// rbacCondition is the RBACPermissionsGranted condition of a verdict.
func rbacCondition(verdict error, generation int64) metav1.Condition {
	cond := metav1.Condition{
		Type:               ConditionRBACPermissionsGranted,
		Status:             metav1.ConditionTrue,
		Reason:             reasonSucceeded,
		Message:            MessagePermissionsGranted,
		ObservedGeneration: generation,
	}
	if verdict != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reasonFailed, verdict.Error()
	}
	return cond
}

// Status returns the merge patch that makes live, the status the cache
// holds of p, tell out: nil when it tells it already, so that a sync that
// changes nothing writes nothing. granted is the verdict to keep when out
// carries none (the patch replaces the list of conditions).
func Status(p apiv1.Policy, live *apiv1.GeneratingPolicyStatus, out Outcome, granted *Verdict) map[string]any {
	status := *live.DeepCopy()
	cond := ReadyCondition(p.GetGeneration(), out)
	meta.SetStatusCondition(&status.Conditions, cond)
	setProgress(&status.Conditions, cond, out)
	// Kyverno's conditionStatus.ready says the policy compiled, is
	// watching and may do its work; what became of one trigger is that
	// trigger's: the condition there stays True and names the failures,
	// which Kyverno's CRDs, dropping Sprout's own fields, keep.
	kyvernoCond := cond
	if out.PerTrigger() {
		kyvernoCond.Status = metav1.ConditionTrue
		kyvernoCond.Message = BoundedMessage(fmt.Sprintf("%d of its triggers failed: %s", out.Failed, out.Err))
	}
	ready := kyvernoCond.Status == metav1.ConditionTrue
	status.ConditionStatus.Message = ""
	if !ready {
		status.ConditionStatus.Message = kyvernoCond.Message
	}
	meta.SetStatusCondition(&status.ConditionStatus.Conditions, kyvernoCond)
	if out.Granted != nil {
		granted = out.Granted
	}
	if granted != nil {
		meta.SetStatusCondition(&status.ConditionStatus.Conditions, rbacCondition(granted.Err, p.GetGeneration()))
	}
	// Kyverno's ready: every condition true.
	if granted := meta.FindStatusCondition(status.ConditionStatus.Conditions, ConditionRBACPermissionsGranted); ready && granted != nil && granted.Status != metav1.ConditionTrue {
		ready = false
		status.ConditionStatus.Message = granted.Message
	}
	status.ConditionStatus.Ready = &ready
	status.ObservedGeneration = p.GetGeneration()
	if out.Counted() {
		status.Triggers, status.Objects, status.FailedTriggers = out.Triggers, out.Objects, out.Failed
	}
	if equality.Semantic.DeepEqual(&status, live) ||
		KeepsOnlyKyvernoStatus(live) && equality.Semantic.DeepEqual(status.ConditionStatus, live.ConditionStatus) {
		return nil
	}
	patch := statusPatch{GeneratingPolicyStatus: status, ConditionStatus: conditionStatusPatch{
		Ready: status.ConditionStatus.Ready, Conditions: status.ConditionStatus.Conditions}}
	if m := status.ConditionStatus.Message; m != "" {
		patch.ConditionStatus.Message = &m
	}
	if out.Counted() {
		patch.Triggers, patch.Objects = &out.Triggers, &out.Objects
	}
	return map[string]any{"status": patch}
}

// ProgressingStatus returns the merge patch that marks generation, of a
// policy whose status the cache holds as live, Reconciling; nil when it is
// marked already, or when the CRD keeps no Reconciling.
func ProgressingStatus(live *apiv1.GeneratingPolicyStatus, generation int64) map[string]any {
	if KeepsOnlyKyvernoStatus(live) {
		return nil // Kyverno's CRDs keep no Reconciling
	}
	conds := slices.Clone(live.Conditions)
	setProgressing(&conds, generation)
	if equality.Semantic.DeepEqual(conds, live.Conditions) {
		return nil
	}
	return map[string]any{"status": map[string]any{"conditions": conds}}
}

// Progressing reports whether p's status describes an older generation,
// judged by the Ready condition of Kyverno's conditionStatus, which both
// Sprout's CRDs and Kyverno's keep.
func Progressing(p apiv1.Policy) bool {
	ready := meta.FindStatusCondition(p.PolicyStatus().ConditionStatus.Conditions, ConditionReady)
	return ready == nil || ready.ObservedGeneration != p.GetGeneration()
}

// statusPatch is a policy's status as a merge patch sends it. The API
// type omits empty fields, which a merge patch leaves at their old value:
// a count of 0 (which kubectl would show blank) and a message gone are
// sent as such.
type statusPatch struct {
	apiv1.GeneratingPolicyStatus
	ConditionStatus conditionStatusPatch `json:"conditionStatus"`
	// Triggers and Objects are sent when the sync counted them.
	Triggers *int `json:"triggers,omitempty"`
	Objects  *int `json:"objects,omitempty"`
}

// conditionStatusPatch is Kyverno's conditionStatus, its message null,
// which removes it, when the policy is ready.
type conditionStatusPatch struct {
	Ready      *bool              `json:"ready,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Message    *string            `json:"message"`
}

// KeepsOnlyKyvernoStatus reports whether the policy's CRD is Kyverno's, which
// stores conditionStatus and drops Sprout's own status fields: Sprout writes
// observedGeneration whenever it writes conditionStatus.ready, so ready
// stored without it was pruned. Compared in full, every sync would write the
// dropped fields again.
func KeepsOnlyKyvernoStatus(live *apiv1.GeneratingPolicyStatus) bool {
	return live.ConditionStatus.Ready != nil && live.ObservedGeneration == 0 && len(live.Conditions) == 0
}

// ReadyCondition summarises a sync's outcome, for a policy's generation,
// as the Ready condition.
func ReadyCondition(generation int64, out Outcome) metav1.Condition {
	cond := metav1.Condition{
		Type:               ConditionReady,
		Status:             metav1.ConditionTrue,
		Reason:             ReasonReconciled,
		Message:            countOf(out.Triggers, "trigger") + ", " + countOf(out.Objects, "object"),
		ObservedGeneration: generation,
	}
	if out.Reason != "" {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, out.Reason, BoundedMessage(out.Err.Error())
	}
	return cond
}

// countOf reads "1 trigger", "2 triggers", "0 triggers".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// maxConditionMessage bounds a condition's message well below the 32768
// bytes the CRDs allow: with many failing triggers the joined errors would
// exceed it, and the API server would refuse the whole status.
const maxConditionMessage = 8192

// BoundedMessage cuts msg to maxConditionMessage bytes at a rune boundary,
// saying where the rest is.
func BoundedMessage(msg string) string {
	const more = " … (cut; every error is in the policy's Events and Sprout's log)"
	if len(msg) <= maxConditionMessage {
		return msg
	}
	cut := maxConditionMessage - len(more)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + more
}

// setProgress sets Reconciling and Stalled on conds to agree with ready,
// the Ready condition a sync's outcome gave: Ready True clears both, a
// failure no retry can cure is Stalled, any other failure is Reconciling.
// Each carries ready's reason, message and generation, so that every reader
// tells the same story.
func setProgress(conds *[]metav1.Condition, ready metav1.Condition, out Outcome) {
	if ready.Status == metav1.ConditionTrue {
		meta.RemoveStatusCondition(conds, ConditionReconciling)
		meta.RemoveStatusCondition(conds, ConditionStalled)
		return
	}
	cond := ready
	cond.Status = metav1.ConditionTrue
	if out.Stalled() {
		cond.Type = ConditionStalled
		meta.RemoveStatusCondition(conds, ConditionReconciling)
	} else {
		cond.Type, cond.Reason = ConditionReconciling, ReasonProgressingWithRetry
		meta.RemoveStatusCondition(conds, ConditionStalled)
	}
	meta.SetStatusCondition(conds, cond)
}

// setProgressing marks a generation being applied: Reconciling True, the
// other conditions left as the last sync wrote them.
func setProgressing(conds *[]metav1.Condition, generation int64) {
	meta.RemoveStatusCondition(conds, ConditionStalled)
	meta.SetStatusCondition(conds, metav1.Condition{
		Type:               ConditionReconciling,
		Status:             metav1.ConditionTrue,
		Reason:             ReasonProgressing,
		Message:            "applying generation " + strconv.FormatInt(generation, 10),
		ObservedGeneration: generation,
	})
}

// SetConditions sets on conds, the conditions of the policy's record, the
// Ready, Reconciling and Stalled conditions out gives generation; an
// outcome that says a sync is under way sets Reconciling alone.
func SetConditions(conds *[]metav1.Condition, generation int64, out Outcome) {
	if out.Reason == ReasonProgressing {
		setProgressing(conds, generation)
		return
	}
	ready := ReadyCondition(generation, out)
	meta.SetStatusCondition(conds, ready)
	setProgress(conds, ready, out)
}
