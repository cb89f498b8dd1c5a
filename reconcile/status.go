package reconcile

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
	"github.com/sprout-gitops/sprout/sources"
)

// Reasons of the Ready condition (package report says when each is given).
const (
	ReasonReconciled            = report.ReasonReconciled
	ReasonCompileFailed         = report.ReasonCompileFailed
	ReasonMatchFailed           = report.ReasonMatchFailed
	ReasonEvaluationFailed      = report.ReasonEvaluationFailed
	ReasonApplyFailed           = report.ReasonApplyFailed
	ReasonNotOwned              = report.ReasonNotOwned
	ReasonPruneFailed           = report.ReasonPruneFailed
	ReasonUnobservableTrigger   = report.ReasonUnobservableTrigger
	ReasonInvalidServiceAccount = report.ReasonInvalidServiceAccount
)

// Conditions a policy's status holds (package report).
const (
	ConditionReady                  = report.ConditionReady
	ConditionReconciling            = report.ConditionReconciling
	ConditionStalled                = report.ConditionStalled
	ConditionRBACPermissionsGranted = report.ConditionRBACPermissionsGranted
	// MessagePermissionsGranted is the message of a true
	// RBACPermissionsGranted, Kyverno's.
	MessagePermissionsGranted  = report.MessagePermissionsGranted
	ReasonProgressing          = report.ReasonProgressing
	ReasonProgressingWithRetry = report.ReasonProgressingWithRetry
)

// outcome is what one sync found, for the policy's status.
type outcome = report.Outcome

// reportStatus writes the policy's status when it differs from what the
// cache holds, so a sync that changes nothing writes nothing.
func (c *Controller) reportStatus(ctx context.Context, cp *policy.Compiled, out outcome) error {
	if cp.Source != sources.ClusterSourceName {
		return nil // only policies stored in the cluster have a status to write
	}
	if out.Reason == ReasonProgressing {
		return c.reportProgressing(ctx, cp)
	}
	patch := report.Status(cp.Policy, c.liveStatus(cp), out, c.states.of(policy.KeyOf(cp.Policy)).reported())
	if patch == nil {
		return nil
	}
	return c.patchStatus(ctx, cp, patch)
}

// patchStatus merges body into the policy's status.
func (c *Controller) patchStatus(ctx context.Context, cp *policy.Compiled, body map[string]any) error {
	patch, err := json.Marshal(body)
	if err != nil {
		return err
	}
	gvr, ns := policyResource(cp.Policy)
	// Kyverno's CRDs keep conditionStatus alone: the fields they do not
	// declare are dropped without a warning on every write, and the loss
	// is said once (keptStatus).
	opts := metav1.PatchOptions{FieldManager: "sprout", FieldValidation: metav1.FieldValidationIgnore}
	out, err := c.dynamic.Resource(gvr).Namespace(ns).Patch(ctx, cp.Policy.GetName(), types.MergePatchType, patch, opts, "status")
	if err != nil {
		return fmt.Errorf("%s: status: %w", policy.KeyOf(cp.Policy), err)
	}
	c.keptStatus(out)
	c.states.of(policy.KeyOf(cp.Policy)).statusWritten(out)
	return nil
}

// keptStatus says, once, when the status a write stored lacks Sprout's own
// fields (observedGeneration is written with every conditionStatus): the
// installed policy CRDs are Kyverno's, and what Flux and kubectl read from
// Sprout's fields is lost.
func (c *Controller) keptStatus(out *unstructured.Unstructured) {
	status, _ := out.Object["status"].(map[string]any)
	if _, ok := status["conditionStatus"]; !ok {
		return // a write of Reconciling alone
	}
	if _, ok := status["observedGeneration"]; ok {
		return
	}
	c.reports.dropped.Do(func() {
		c.log.Warn("the installed policy CRDs are Kyverno's: they keep status.conditionStatus alone, so the kstatus conditions (Ready, Reconciling, Stalled) that Flux health checks and kubectl wait read, observedGeneration and the trigger and object counts are not stored; Sprout's CRDs (deploy/crds) keep them")
	})
}

func policyResource(p apiv1.Policy) (schema.GroupVersionResource, string) {
	if p.IsNamespaced() {
		return apiv1.NamespacedGeneratingPolicies, p.GetNamespace()
	}
	return apiv1.GeneratingPolicies, ""
}
