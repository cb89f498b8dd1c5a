package reconcile

import (
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	listersv1 "k8s.io/client-go/listers/core/v1"
)

// Matcher decides whether a policy's match constraints select a trigger,
// with the API server's own admission-policy matching code.
type Matcher struct {
	matcher *matching.Matcher
	objects admission.ObjectInterfaces
}

// NewMatcher returns a Matcher that reads namespace labels from namespaces,
// and from client for a namespace the lister does not hold yet. Offline
// callers may pass a nil client if the lister holds every namespace.
func NewMatcher(namespaces listersv1.NamespaceLister, client kubernetes.Interface) *Matcher {
	return &Matcher{
		matcher: matching.NewMatcher(namespaces, client),
		objects: admission.NewObjectInterfacesFromScheme(scheme.Scheme),
	}
}

// Matches reports whether mr selects the trigger u of resource gvr in an
// admission request for op. With anyOperation, the rules' operations are
// ignored: the question is whether the trigger matches as it is.
func (m *Matcher) Matches(mr admissionregistrationv1.MatchResources, anyOperation bool, gvr schema.GroupVersionResource, op admission.Operation, u *unstructured.Unstructured) (bool, error) {
	c := newCriteria(mr)
	crit := c.events
	if anyOperation {
		crit = c.state
	}
	return m.matches(crit, gvr, op, u.GroupVersionKind(), u)
}

// selectable is what the matcher reads of a trigger: its identity, and its
// labels for the selectors, nothing else.
type selectable interface {
	runtime.Object
	metav1.Object
}

// matches runs the matcher on the trigger u, of kind gvk, as an admission
// request.
func (m *Matcher) matches(crit matchCriteria, gvr schema.GroupVersionResource, op admission.Operation, gvk schema.GroupVersionKind, u selectable) (bool, error) {
	// Interfaces, not pointers: a nil pointer in a runtime.Object would
	// look present to the matcher.
	var obj, old runtime.Object = u, nil
	if op == admission.Delete {
		obj, old = nil, u
	}
	attr := admission.NewAttributesRecord(obj, old, gvk, u.GetNamespace(), u.GetName(), gvr, "", op, nil, false, nil)
	ok, _, _, err := m.matcher.Matches(attr, m.objects, crit)
	return ok, err
}

// criteria adapts a policy's match constraints to the apiserver's admission
// policy matcher (k8s.io/apiserver/pkg/admission/plugin/policy/matching), so
// resource rules, exclusions, selectors and matchPolicy behave exactly as
// they do for a ValidatingAdmissionPolicy.
type criteria struct {
	// events is the constraints as written: operations decide which events
	// admit a trigger.
	events matchCriteria
	// state is whether a trigger, as it is, stays selected, whatever event
	// admitted it (a no-op UPDATE of a CREATE-only trigger must not take its
	// downstream away): the resource rules' operations are ignored, and an
	// exclusion counts only if it covers every event a live trigger can be
	// admitted by (CREATE and UPDATE). One scoped to DELETE, or to UPDATE
	// alone, excludes those events and nothing else.
	state matchCriteria
}

func newCriteria(mr admissionregistrationv1.MatchResources) criteria {
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
	return criteria{events: newMatchCriteria(mr), state: newMatchCriteria(state)}
}

// coversLiveEvents reports whether operations include every event that
// admits a trigger that exists: CREATE and UPDATE.
func coversLiveEvents(ops []admissionregistrationv1.OperationType) bool {
	has := func(op admissionregistrationv1.OperationType) bool {
		return slices.Contains(ops, op) || slices.Contains(ops, admissionregistrationv1.OperationAll)
	}
	return has(admissionregistrationv1.Create) && has(admissionregistrationv1.Update)
}

// matchCriteria implements matching.MatchCriteria. Its selectors are
// parsed once, not for every trigger of every sync.
type matchCriteria struct {
	mr                   admissionregistrationv1.MatchResources
	namespaces, objects  labels.Selector
	namespaceErr, objErr error
}

func newMatchCriteria(mr admissionregistrationv1.MatchResources) matchCriteria {
	m := matchCriteria{mr: mr}
	m.namespaces, m.namespaceErr = selector(mr.NamespaceSelector)
	m.objects, m.objErr = selector(mr.ObjectSelector)
	return m
}

// readsLabels reports whether a selector of m reads labels: without one,
// the matcher needs a trigger's identity alone.
func (m matchCriteria) readsLabels() bool {
	return m.namespaces == nil || !m.namespaces.Empty() || m.objects == nil || !m.objects.Empty()
}

func (m matchCriteria) GetMatchResources() admissionregistrationv1.MatchResources { return m.mr }

func (m matchCriteria) GetParsedNamespaceSelector() (labels.Selector, error) {
	return m.namespaces, m.namespaceErr
}

func (m matchCriteria) GetParsedObjectSelector() (labels.Selector, error) {
	return m.objects, m.objErr
}

// selector parses a label selector; an absent one selects everything, as in
// admission policies.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}
