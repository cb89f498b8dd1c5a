package policy

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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

// TestListedCriteriaTrustTheInformer: the triggers of an informer that
// lists by the policy's object selector are matched without their labels;
// without a pushed selector, the labels are read.
func TestListedCriteriaTrustTheInformer(t *testing.T) {
	mr := admissionregistrationv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "trigger"}}}
	cp := &Compiled{Criteria: NewCriteria(mr)}
	if !cp.Listed(cp.Criteria.State).ReadsLabels() {
		t.Error("without a pushed selector, the criteria do not read a trigger's labels")
	}
	cp.Selector = "role=trigger"
	crit := cp.Listed(cp.Criteria.State)
	if crit.ReadsLabels() {
		t.Error("with the selector pushed into the informer, the criteria still read a trigger's labels")
	}
	if sel, _ := crit.GetParsedObjectSelector(); !sel.Matches(labels.Set{}) {
		t.Error("with the selector pushed, an unlabelled object from the informer is not selected")
	}
	if !cp.Criteria.State.ReadsLabels() {
		t.Error("Listed changed the policy's own criteria")
	}
}
