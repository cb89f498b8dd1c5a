package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/sources"
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
)

// ConditionReady is the condition that summarises a policy.
const ConditionReady = "Ready"

// outcome is what one sync found, for the policy's status.
type outcome struct {
	reason   string // empty when all went well
	err      error
	triggers int
	objects  int
	// failed counts the triggers that failed: their match, their
	// evaluation, or a refusal of what they generate.
	failed int
	// granted is the RBACPermissionsGranted verdict; nil leaves the
	// condition as it was.
	granted *grantVerdict
}

// counted reports whether the sync got as far as counting triggers and
// objects: a policy that does not compile, or names an account it may not
// run as, keeps the counts its last sync wrote.
func (o outcome) counted() bool {
	switch o.reason {
	case ReasonCompileFailed, ReasonInvalidServiceAccount, ReasonSuspended, ReasonProgressing:
		return false
	}
	return true
}

// reportStatus writes the policy's status when it differs from what the
// cache holds, so a sync that changes nothing writes nothing.
func (c *Controller) reportStatus(ctx context.Context, cp *compiledPolicy, out outcome) error {
	if cp.source != sources.ClusterSourceName {
		return nil // only policies stored in the cluster have a status to write
	}
	if out.reason == ReasonProgressing {
		return c.reportProgressing(ctx, cp)
	}
	live := c.liveStatus(cp)
	status := *live.DeepCopy()
	cond := readyCondition(cp, out)
	meta.SetStatusCondition(&status.Conditions, cond)
	setProgress(&status.Conditions, cond, out)
	// Kyverno's conditionStatus.ready says the policy compiled, is
	// watching and may do its work; what became of one trigger is that
	// trigger's: the condition there stays True and names the failures,
	// which Kyverno's CRDs, dropping Sprout's own fields, keep.
	kyvernoCond := cond
	if perTrigger(out) {
		kyvernoCond.Status = metav1.ConditionTrue
		kyvernoCond.Message = boundedMessage(fmt.Sprintf("%d of its triggers failed: %s", out.failed, out.err))
	}
	ready := kyvernoCond.Status == metav1.ConditionTrue
	status.ConditionStatus.Message = ""
	if !ready {
		status.ConditionStatus.Message = kyvernoCond.Message
	}
	meta.SetStatusCondition(&status.ConditionStatus.Conditions, kyvernoCond)
	granted := out.granted
	if granted == nil {
		// The patch replaces the list: what the cache does not hold yet
		// would go.
		granted = c.access.reported(keyOf(cp.policy))
	}
	if granted != nil {
		meta.SetStatusCondition(&status.ConditionStatus.Conditions, rbacCondition(granted.err, cp.policy.GetGeneration()))
	}
	// Kyverno's ready: every condition true.
	if granted := meta.FindStatusCondition(status.ConditionStatus.Conditions, ConditionRBACPermissionsGranted); ready && granted != nil && granted.Status != metav1.ConditionTrue {
		ready = false
		status.ConditionStatus.Message = granted.Message
	}
	status.ConditionStatus.Ready = &ready
	status.ObservedGeneration = cp.policy.GetGeneration()
	if out.counted() {
		status.Triggers, status.Objects, status.FailedTriggers = out.triggers, out.objects, out.failed
	}
	if equality.Semantic.DeepEqual(&status, live) ||
		keepsOnlyKyvernoStatus(live) && equality.Semantic.DeepEqual(status.ConditionStatus, live.ConditionStatus) {
		return nil
	}
	patch := statusPatch{GeneratingPolicyStatus: status, ConditionStatus: conditionStatusPatch{
		Ready: status.ConditionStatus.Ready, Conditions: status.ConditionStatus.Conditions}}
	if m := status.ConditionStatus.Message; m != "" {
		patch.ConditionStatus.Message = &m
	}
	if out.counted() {
		patch.Triggers, patch.Objects = &out.triggers, &out.objects
	}
	return c.patchStatus(ctx, cp, map[string]any{"status": patch})
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

// patchStatus merges body into the policy's status.
func (c *Controller) patchStatus(ctx context.Context, cp *compiledPolicy, body map[string]any) error {
	patch, err := json.Marshal(body)
	if err != nil {
		return err
	}
	gvr, ns := policyResource(cp.policy)
	out, err := c.dynamic.Resource(gvr).Namespace(ns).Patch(ctx, cp.policy.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "sprout"}, "status")
	if err != nil {
		return fmt.Errorf("%s: status: %w", keyOf(cp.policy), err)
	}
	c.statusWrites.written(keyOf(cp.policy), out)
	return nil
}

// keepsOnlyKyvernoStatus reports whether the policy's CRD is Kyverno's, which
// stores conditionStatus and drops Sprout's own status fields: Sprout writes
// observedGeneration whenever it writes conditionStatus.ready, so ready
// stored without it was pruned. Compared in full, every sync would write the
// dropped fields again.
func keepsOnlyKyvernoStatus(live *apiv1.GeneratingPolicyStatus) bool {
	return live.ConditionStatus.Ready != nil && live.ObservedGeneration == 0 && len(live.Conditions) == 0
}

func policyResource(p apiv1.Policy) (schema.GroupVersionResource, string) {
	if p.IsNamespaced() {
		return apiv1.NamespacedGeneratingPolicies, p.GetNamespace()
	}
	return apiv1.GeneratingPolicies, ""
}

// perTrigger reports whether a sync failed for some triggers, not for the
// policy: the others were generated and pruned.
func perTrigger(out outcome) bool {
	switch out.reason {
	case ReasonEvaluationFailed, ReasonMatchFailed, ReasonRefused:
		return out.failed > 0
	}
	return false
}

// readyCondition summarises a sync's outcome as the Ready condition.
func readyCondition(cp *compiledPolicy, out outcome) metav1.Condition {
	cond := metav1.Condition{
		Type:               ConditionReady,
		Status:             metav1.ConditionTrue,
		Reason:             ReasonReconciled,
		Message:            countOf(out.triggers, "trigger") + ", " + countOf(out.objects, "object"),
		ObservedGeneration: cp.policy.GetGeneration(),
	}
	if out.reason != "" {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, out.reason, boundedMessage(out.err.Error())
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

// boundedMessage cuts msg to maxConditionMessage bytes at a rune boundary,
// saying where the rest is.
func boundedMessage(msg string) string {
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
