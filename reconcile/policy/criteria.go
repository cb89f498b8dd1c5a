package policy

import (
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Criteria adapts a policy's match constraints to the apiserver's admission
// policy matcher (k8s.io/apiserver/pkg/admission/plugin/policy/matching), so
// resource rules, exclusions, selectors and matchPolicy behave exactly as
// they do for a ValidatingAdmissionPolicy.
type Criteria struct {
	// Events is the constraints as written: operations decide which Events
	// admit a trigger.
	Events MatchCriteria
	// State is whether a trigger, as it is, stays selected, whatever event
	// admitted it (a no-op UPDATE of a CREATE-only trigger must not take its
	// downstream away): the resource rules' operations are ignored, and an
	// exclusion counts only if it covers every event a live trigger can be
	// admitted by (CREATE and UPDATE). One scoped to DELETE, or to UPDATE
	// alone, excludes those events and nothing else.
	State MatchCriteria
}

func NewCriteria(mr admissionregistrationv1.MatchResources) Criteria {
	state := *mr.DeepCopy()
	all := []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
	for i := range state.ResourceRules {
		state.ResourceRules[i].Operations = all
	}
	state.ExcludeResourceRules = slices.DeleteFunc(state.ExcludeResourceRules, func(r admissionregistrationv1.NamedRuleWithOperations) bool {
		return !coversLiveEvents(r.Operations)
	})
	for i := range state.ExcludeResourceRules {
		state.ExcludeResourceRules[i].Operations = all
	}
	return Criteria{Events: NewMatchCriteria(mr), State: NewMatchCriteria(state)}
}

// coversLiveEvents reports whether operations include every event that
// admits a trigger that exists: CREATE and UPDATE.
func coversLiveEvents(ops []admissionregistrationv1.OperationType) bool {
	has := func(op admissionregistrationv1.OperationType) bool {
		return slices.Contains(ops, op) || slices.Contains(ops, admissionregistrationv1.OperationAll)
	}
	return has(admissionregistrationv1.Create) && has(admissionregistrationv1.Update)
}

// MatchCriteria implements matching.MatchCriteria. Its selectors are
// parsed once, not for every trigger of every sync.
type MatchCriteria struct {
	MR                   admissionregistrationv1.MatchResources
	Namespaces, Objects  labels.Selector
	NamespaceErr, ObjErr error
}

func NewMatchCriteria(mr admissionregistrationv1.MatchResources) MatchCriteria {
	m := MatchCriteria{MR: mr}
	m.Namespaces, m.NamespaceErr = selector(mr.NamespaceSelector)
	m.Objects, m.ObjErr = selector(mr.ObjectSelector)
	return m
}

// ReadsLabels reports whether a selector of m reads labels: without one,
// the matcher needs a trigger's identity alone.
func (m MatchCriteria) ReadsLabels() bool {
	return m.Namespaces == nil || !m.Namespaces.Empty() || m.Objects == nil || !m.Objects.Empty()
}

func (m MatchCriteria) GetMatchResources() admissionregistrationv1.MatchResources { return m.MR }

func (m MatchCriteria) GetParsedNamespaceSelector() (labels.Selector, error) {
	return m.Namespaces, m.NamespaceErr
}

func (m MatchCriteria) GetParsedObjectSelector() (labels.Selector, error) {
	return m.Objects, m.ObjErr
}

// selector parses a label selector; an absent one selects everything, as in
// admission policies.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}
