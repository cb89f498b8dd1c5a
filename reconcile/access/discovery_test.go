package access

import (
	"errors"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

func TestFailedGroupMatters(t *testing.T) {
	rule := func(group, version string) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{"*"}},
		}}
	}
	metricsDown := &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("503")}}
	tests := []struct {
		name  string
		err   error
		rules []admissionregistrationv1.NamedRuleWithOperations
		want  bool
	}{
		{"an unrelated group is down", metricsDown, []admissionregistrationv1.NamedRuleWithOperations{rule("", "v1")}, false},
		{"the group the rules name is down", metricsDown, []admissionregistrationv1.NamedRuleWithOperations{rule("metrics.k8s.io", "v1beta1")}, true},
		{"a wildcard names every group", metricsDown, []admissionregistrationv1.NamedRuleWithOperations{rule("*", "*")}, true},
		{"any other error counts", errors.New("connection refused"), []admissionregistrationv1.NamedRuleWithOperations{rule("", "v1")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := failedGroupMatters(tt.err, tt.rules); got != tt.want {
				t.Fatalf("failedGroupMatters = %v, want %v", got, tt.want)
			}
		})
	}
}
