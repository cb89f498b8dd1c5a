package reconcile_test

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/reconcile"
)

// readyOf returns a policy's Ready condition from Sprout's status.conditions
// or, under Kyverno's CRDs (SPROUT_TEST_CRDS=kyverno), which drop that
// field, from status.conditionStatus, where Sprout writes it too.
func readyOf(p apiv1.Policy) *metav1.Condition {
	s := p.PolicyStatus()
	if c := meta.FindStatusCondition(s.Conditions, reconcile.ConditionReady); c != nil {
		return c
	}
	return meta.FindStatusCondition(s.ConditionStatus.Conditions, reconcile.ConditionReady)
}
