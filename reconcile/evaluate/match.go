package evaluate

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	listersv1 "k8s.io/client-go/listers/core/v1"

	"github.com/sprout-gitops/sprout/reconcile/policy"
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
	c := policy.NewCriteria(mr)
	crit := c.Events
	if anyOperation {
		crit = c.State
	}
	return m.MatchesCriteria(crit, gvr, op, u.GroupVersionKind(), u)
}

// Selectable is what the matcher reads of a trigger: its identity, and its
// labels for the selectors, nothing else (cluster.Object.Selectable).
type Selectable interface {
	runtime.Object
	metav1.Object
}

// MatchesCriteria runs the matcher on the trigger u, of kind gvk, as an
// admission request for op.
func (m *Matcher) MatchesCriteria(crit policy.MatchCriteria, gvr schema.GroupVersionResource, op admission.Operation, gvk schema.GroupVersionKind, u Selectable) (bool, error) {
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
