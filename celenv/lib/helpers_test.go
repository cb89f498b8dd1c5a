package lib_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
)

// libCase is one expression of a utility library and what it must give: a
// JSON value (as generator.Apply writes it into an object), or an error.
type libCase struct {
	name    string
	expr    string
	want    any    // when wantErr is empty
	wantErr string // substring of the compile or evaluation error
}

// libPolicy is a policy on Namespace creation whose variables are exprs, in
// order, and whose generate entry writes the last one into a ConfigMap.
func libPolicy(exprs ...string) *apiv1.GeneratingPolicy {
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

// evalLib compiles expr as the only variable of a policy and evaluates it at
// now (zero: the wall clock), returning the value the policy generated.
func evalLib(t *testing.T, expr string, now time.Time) (any, error) {
	t.Helper()
	prog := celenv.Compile(libPolicy(expr))
	if err := prog.Err(); err != nil {
		return nil, err
	}
	res, err := prog.Evaluate(context.Background(), celenv.Input{
		Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team"}},
		Now:    now,
	})
	if err != nil {
		return nil, err
	}
	if len(res.Objects) != 1 {
		t.Fatalf("want one generated object, got %d", len(res.Objects))
	}
	return res.Objects[0].Object.Object["data"].(map[string]any)["value"], nil
}

// runLibCases evaluates each case at now and checks its value or error.
func runLibCases(t *testing.T, now time.Time, cases []libCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := evalLib(t, tc.expr, now)
			switch {
			case tc.wantErr != "" && err == nil:
				t.Fatalf("want an error containing %q, got value %#v", tc.wantErr, got)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("want an error containing %q, got %v", tc.wantErr, err)
			case tc.wantErr == "" && err != nil:
				t.Fatalf("want %#v, got error %v", tc.want, err)
			case tc.wantErr == "":
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", tc.expr, diff)
				}
			}
		})
	}
}
