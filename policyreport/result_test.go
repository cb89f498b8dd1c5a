package policyreport

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The results Kyverno's engine for generating policies gives
// (pkg/cel/policies/gpol/engine, pkg/utils/report/results.go), for the
// cases its reports controller can show without a cluster.
func TestResultsAsKyvernoGivesThem(t *testing.T) {
	policy := &metav1.ObjectMeta{Namespace: "team", Name: "quota", Annotations: map[string]string{
		AnnotationScored: "false", AnnotationSeverity: "urgent",
	}}
	for _, tc := range []struct {
		name string
		got  *Result
		want *Result
	}{{
		name: "an exception skips, named by namespace/name in the message and by name in the property",
		got:  Excepted(policy, []string{"team/allow-a", "team/allow-b"}, ""),
		want: &Result{Policy: "team/quota", Rule: "exception", Result: StatusSkip, Scored: false,
			Message:    "rule is skipped due to policy exception: team/allow-a, team/allow-b",
			Properties: map[string]string{"process": "admission review", "exceptions": "allow-a,allow-b"}},
	}, {
		name: "an exception with reportResult pass passes",
		got:  Excepted(policy, []string{"team/allow-a"}, StatusPass),
		want: &Result{Policy: "team/quota", Rule: "exception", Result: StatusPass,
			Message:    "rule is passed due to policy exception: team/allow-a",
			Properties: map[string]string{"process": "admission review", "exceptions": "allow-a"}},
	}, {
		name: "an auditAnnotation passMessage replaces the message, message replaces every status's",
		got:  Pass(policy, map[string]string{"passMessage": "quota set"}, nil),
		want: &Result{Policy: "team/quota", Rule: "quota", Result: StatusPass, Message: "quota set",
			Properties: map[string]string{"process": "admission review", "passMessage": "quota set"}},
	}, {
		name: "message wins over passMessage",
		got:  Pass(policy, map[string]string{"passMessage": "a", "message": "b"}, nil),
		want: &Result{Policy: "team/quota", Rule: "quota", Result: StatusPass, Message: "b",
			Properties: map[string]string{"process": "admission review", "passMessage": "a", "message": "b"}},
	}} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
