package policy

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestAdmitsAlike: a selector is pushed only for rules under which an
// object labelled into the selection (an ADDED event, replayed as a
// CREATE) is admitted as its UPDATE would have been, and one labelled out
// (a DELETED event) leaves no tombstone.
func TestAdmitsAlike(t *testing.T) {
	type ops = []admissionregistrationv1.OperationType
	const c, u, d, all = admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete, admissionregistrationv1.OperationAll
	rules := func(o ...ops) []admissionregistrationv1.NamedRuleWithOperations {
		var out []admissionregistrationv1.NamedRuleWithOperations
		for _, x := range o {
			out = append(out, admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: x}})
		}
		return out
	}
	for _, tc := range []struct {
		name             string
		resource, except []admissionregistrationv1.NamedRuleWithOperations
		want             bool
	}{
		{"CREATE and UPDATE", rules(ops{c, u}), nil, true},
		{"every rule lists both", rules(ops{u, c}, ops{c, u}), nil, true},
		{"CREATE only", rules(ops{c}), nil, false},
		{"UPDATE only", rules(ops{u}), nil, false},
		{"one rule CREATE only", rules(ops{c, u}, ops{c}), nil, false},
		{"DELETE too", rules(ops{c, u, d}), nil, false},
		{"every operation", rules(ops{all}), nil, false},
		{"an exclusion of both", rules(ops{c, u}), rules(ops{all}), true},
		{"an exclusion of DELETE", rules(ops{c, u}), rules(ops{d}), true},
		{"an exclusion of UPDATE alone", rules(ops{c, u}), rules(ops{u}), false},
	} {
		mc := &admissionregistrationv1.MatchResources{ResourceRules: tc.resource, ExcludeResourceRules: tc.except}
		if got := admitsAlike(mc); got != tc.want {
			t.Errorf("%s: admitsAlike = %v, want %v", tc.name, got, tc.want)
		}
	}
}
