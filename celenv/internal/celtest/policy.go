// Package celtest holds what the tests of celenv and its libraries share:
// policies built around the expressions under test.
package celtest

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// ExprPolicy is a policy on Namespace creation whose variables are exprs,
// in order (v0, v1, …), and whose generate entry writes the last one into
// a ConfigMap named out.
func ExprPolicy(exprs ...string) *apiv1.GeneratingPolicy {
	spec := apiv1.GeneratingPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{
						APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"},
					},
				},
			}},
		},
	}
	for i, e := range exprs {
		spec.Variables = append(spec.Variables, admissionregistrationv1.Variable{Name: fmt.Sprintf("v%d", i), Expression: e})
	}
	spec.Generation = []apiv1.Generation{{Expression: fmt.Sprintf(
		`generator.Apply("out", [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "out"}, "data": {"value": variables.v%d}}])`,
		len(exprs)-1)}}
	return &apiv1.GeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "lib"}, Spec: spec}
}
