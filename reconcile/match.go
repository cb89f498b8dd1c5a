package reconcile

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// criteria adapts a policy's match constraints to the apiserver's admission
// policy matcher (k8s.io/apiserver/pkg/admission/plugin/policy/matching), so
// resource rules, exclusions, selectors and matchPolicy behave exactly as
// they do for a ValidatingAdmissionPolicy.
type criteria struct {
	// events is the constraints as written: operations decide which events
	// admit a trigger.
	events matchCriteria
	// state ignores operations: whether a trigger matches now, whatever
	// event brought it, decides whether it is retained (DESIGN §3).
	state matchCriteria
}

func newCriteria(mr admissionregistrationv1.MatchResources) criteria {
	state := *mr.DeepCopy()
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{state.ResourceRules, state.ExcludeResourceRules} {
		for i := range rules {
			rules[i].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
		}
	}
	return criteria{events: matchCriteria{mr}, state: matchCriteria{state}}
}

// matchCriteria implements matching.MatchCriteria.
type matchCriteria struct {
	mr admissionregistrationv1.MatchResources
}

func (m matchCriteria) GetMatchResources() admissionregistrationv1.MatchResources { return m.mr }

func (m matchCriteria) GetParsedNamespaceSelector() (labels.Selector, error) {
	return selector(m.mr.NamespaceSelector)
}

func (m matchCriteria) GetParsedObjectSelector() (labels.Selector, error) {
	return selector(m.mr.ObjectSelector)
}

// selector parses a label selector; an absent one selects everything, as in
// admission policies.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}
