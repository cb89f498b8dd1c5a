package report

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/sources"
)

// Status writes the policy's status when it differs from what the cache
// holds, so a sync that changes nothing writes nothing.
func (t *Teller) Status(ctx context.Context, cp *policy.Compiled, out Outcome) error {
	if cp.Source != sources.ClusterSourceName {
		return nil // only policies stored in the cluster have a status to write
	}
	if out.Reason == ReasonProgressing {
		return t.progressingStatus(ctx, cp)
	}
	patch := Status(cp.Policy, t.liveStatus(cp), out, t.core.Told(policy.KeyOf(cp.Policy)).Reported())
	if patch == nil {
		return nil
	}
	return t.patchStatus(ctx, cp, patch)
}

// Progressing reports a policy Reconciling when a sync of a generation
// its status does not describe yet begins, once per generation. It never
// replaces an outcome not yet written: that outcome is the truth until
// this sync's own replaces it, and a sync cut short must not leave
// Reconciling in its place.
func (t *Teller) Progressing(key policy.Key, cp *policy.Compiled) {
	if cp.Source != sources.ClusterSourceName || !Progressing(cp.Policy) {
		return
	}
	if !t.core.Told(key).Progress(cp.Policy.GetGeneration()) {
		return
	}
	if !t.pending.has(key) {
		t.Later(key, cp, Outcome{Reason: ReasonProgressing})
	}
}

// progressingStatus writes Reconciling on a policy whose new generation a
// sync is applying. The sync's outcome, when it comes first, replaces it
// before it is written: a quick sync writes its status once.
func (t *Teller) progressingStatus(ctx context.Context, cp *policy.Compiled) error {
	patch := ProgressingStatus(t.liveStatus(cp), cp.Policy.GetGeneration())
	if patch == nil {
		return nil
	}
	return t.patchStatus(ctx, cp, patch)
}

// patchStatus merges body into the policy's status.
func (t *Teller) patchStatus(ctx context.Context, cp *policy.Compiled, body map[string]any) error {
	patch, err := json.Marshal(body)
	if err != nil {
		return err
	}
	gvr, ns := policyResource(cp.Policy)
	// Kyverno's CRDs keep conditionStatus alone: the fields they do not
	// declare are dropped without a warning on every write, and the loss
	// is said once (keptStatus).
	opts := metav1.PatchOptions{FieldManager: "sprout", FieldValidation: metav1.FieldValidationIgnore}
	out, err := t.dynamic.Resource(gvr).Namespace(ns).Patch(ctx, cp.Policy.GetName(), types.MergePatchType, patch, opts, "status")
	if err != nil {
		return fmt.Errorf("%s: status: %w", policy.KeyOf(cp.Policy), err)
	}
	t.keptStatus(out)
	t.core.Told(policy.KeyOf(cp.Policy)).statusWritten(out)
	return nil
}

// keptStatus says, once, when the status a write stored lacks Sprout's own
// fields (observedGeneration is written with every conditionStatus): the
// installed policy CRDs are Kyverno's, and what Flux and kubectl read from
// Sprout's fields is lost.
func (t *Teller) keptStatus(out *unstructured.Unstructured) {
	status, _ := out.Object["status"].(map[string]any)
	if _, ok := status["conditionStatus"]; !ok {
		return // a write of Reconciling alone
	}
	if _, ok := status["observedGeneration"]; ok {
		return
	}
	t.dropped.Do(func() {
		t.log.Warn("the installed policy CRDs are Kyverno's: they keep status.conditionStatus alone, so the kstatus conditions (Ready, Reconciling, Stalled) that Flux health checks and kubectl wait read, observedGeneration and the trigger and object counts are not stored; Sprout's CRDs (deploy/crds) keep them")
	})
}

func policyResource(p apiv1.Policy) (schema.GroupVersionResource, string) {
	if p.IsNamespaced() {
		return apiv1.NamespacedGeneratingPolicies, p.GetNamespace()
	}
	return apiv1.GeneratingPolicies, ""
}

// liveStatus is the newest status of cp's policy Sprout knows: its own
// last write, or the newest copy of the policy it holds. cp may be older
// than that copy: a sync, or a report queued for later, keeps the copy it
// began with while status writes come back to the cache; compared with
// it, a status the server already holds would be written again.
func (t *Teller) liveStatus(cp *policy.Compiled) *apiv1.GeneratingPolicyStatus {
	newest := cp.Policy
	if cur := t.core.Policy(policy.KeyOf(cp.Policy)); cur != nil && cluster.Older(newest.GetResourceVersion(), cur.Policy.GetResourceVersion()) {
		newest = cur.Policy
	}
	if written := t.core.Told(policy.KeyOf(newest)).writtenStatus(newest.GetResourceVersion()); written != nil {
		return written
	}
	return newest.PolicyStatus()
}
