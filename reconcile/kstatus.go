package reconcile

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sprout-gitops/sprout/sources"
)

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

// Reasons of the Reconciling condition, Flux's words.
const (
	// ReasonProgressing: a new generation of the policy is being applied;
	// also the reason of the outcome that says so (reportProgressing).
	ReasonProgressing = "Progressing"
	// ReasonProgressingWithRetry: the last sync failed and is retried.
	ReasonProgressingWithRetry = "ProgressingWithRetry"
)

// setProgress sets Reconciling and Stalled on conds to agree with ready,
// the Ready condition a sync's outcome gave: Ready True clears both, a
// failure no retry can cure is Stalled, any other failure is Reconciling.
// Each carries ready's reason, message and generation, so that every reader
// tells the same story.
func setProgress(conds *[]metav1.Condition, ready metav1.Condition, out outcome) {
	if ready.Status == metav1.ConditionTrue {
		meta.RemoveStatusCondition(conds, ConditionReconciling)
		meta.RemoveStatusCondition(conds, ConditionStalled)
		return
	}
	cond := ready
	cond.Status = metav1.ConditionTrue
	if stalled(out) {
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

// stalled reports whether a failed sync cannot progress by being retried:
// Sprout does not retry it, and only a change to the policy, to RBAC or to
// the objects in its way lifts it. Every such change queues the policy.
func stalled(out outcome) bool {
	switch out.reason {
	case ReasonCompileFailed, ReasonInvalidServiceAccount, ReasonRefused, ReasonNotOwned, ReasonUnobservableTrigger, ReasonSuspended:
		return true
	case ReasonMatchFailed:
		var discoveryErr *discoveryError
		var permErr *permissionError
		if errors.As(out.err, &permErr) && !errors.As(out.err, &discoveryErr) {
			return true
		}
	}
	// A write or delete refused: a missing permission, or an account Sprout
	// may not impersonate. Retrying alone cannot fix it.
	return out.err != nil && apierrors.IsForbidden(out.err)
}

// progressed remembers, per policy, the generation last marked Reconciling.
type progressed struct{ m sync.Map } // policyKey → int64

// markProgressing reports a policy Reconciling when a sync of a generation
// its status does not describe yet begins, once per generation. It never
// replaces an outcome not yet written: that outcome is the truth until
// this sync's own replaces it, and a sync cut short must not leave
// Reconciling in its place.
func (c *Controller) markProgressing(key policyKey, cp *compiledPolicy) {
	gen := cp.policy.GetGeneration()
	if c.opts.DryRun || cp.source != sources.ClusterSourceName || !progressing(cp) {
		return
	}
	if last, ok := c.progressed.m.Swap(key, gen); ok && last.(int64) == gen {
		return
	}
	c.reports.mu.Lock()
	_, pending := c.reports.pending[key]
	c.reports.mu.Unlock()
	if !pending {
		c.reportLater(key, cp, outcome{reason: ReasonProgressing})
	}
}

// progressing reports whether cp's status describes an older generation,
// judged by the Ready condition of Kyverno's conditionStatus, which both
// Sprout's CRDs and Kyverno's keep.
func progressing(cp *compiledPolicy) bool {
	ready := meta.FindStatusCondition(cp.policy.PolicyStatus().ConditionStatus.Conditions, ConditionReady)
	return ready == nil || ready.ObservedGeneration != cp.policy.GetGeneration()
}

// reportProgressing writes Reconciling on a policy whose new generation a
// sync is applying. The sync's outcome, when it comes first, replaces it
// before it is written: a quick sync writes its status once.
func (c *Controller) reportProgressing(ctx context.Context, cp *compiledPolicy) error {
	live := c.liveStatus(cp)
	if keepsOnlyKyvernoStatus(live) {
		return nil // Kyverno's CRDs keep no Reconciling
	}
	conds := slices.Clone(live.Conditions)
	setProgressing(&conds, cp.policy.GetGeneration())
	if equality.Semantic.DeepEqual(conds, live.Conditions) {
		return nil
	}
	return c.patchStatus(ctx, cp, map[string]any{"status": map[string]any{"conditions": conds}})
}
