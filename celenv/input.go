package celenv

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Event is the admission event an evaluation replays for one trigger. The
// controller, render and diff describe their triggers with it, and NewInput
// turns it into the same Input for each, so that a policy sees a trigger
// the same wherever it runs.
type Event struct {
	// Operation is CREATE, UPDATE or DELETE.
	Operation string
	// Object is the trigger: as it is, or, for a DELETE, as it was last.
	Object *unstructured.Unstructured
	// OldObject is the trigger before an UPDATE; nil otherwise.
	OldObject *unstructured.Unstructured
	// Resource is the trigger's resource.
	Resource schema.GroupVersionResource
	// Namespace is the trigger's Namespace; nil for a cluster-scoped one.
	Namespace *corev1.Namespace
	// Namespaces, when set, converts Namespace once for every trigger in it.
	Namespaces *NamespaceObjects
}

// NewInput builds the Input of ev. Scopes, Reader, Now and Timeout are the
// caller's to set. The objects are shared, not copied: Evaluate only reads
// them.
func NewInput(ev Event) (Input, error) {
	u := ev.Object
	in := Input{
		Object: u.Object,
		Request: Request{
			UID:       string(u.GetUID()),
			Operation: ev.Operation,
			Name:      u.GetName(),
			Namespace: u.GetNamespace(),
			Kind:      u.GroupVersionKind(),
			Resource:  ev.Resource,
		},
	}
	switch {
	case ev.Operation == "DELETE":
		in.Object, in.OldObject = nil, u.Object
	case ev.OldObject != nil:
		in.OldObject = ev.OldObject.Object
	}
	if ev.Namespace != nil {
		ns, err := ev.Namespaces.Of(ev.Namespace)
		if err != nil {
			return Input{}, err
		}
		in.NamespaceObject = ns
	}
	return in, nil
}

// NamespaceObject is ns as namespaceObject holds it: with apiVersion and
// kind, which a Namespace from a lister lacks, and without managedFields.
func NamespaceObject(ns *corev1.Namespace) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ns)
	if err != nil {
		return nil, err
	}
	m["apiVersion"], m["kind"] = "v1", "Namespace"
	unstructured.RemoveNestedField(m, "metadata", "managedFields")
	return m, nil
}

// NamespaceObjects converts each version of a Namespace once: the triggers
// in one Namespace share its namespaceObject, which programs only read.
// Versions are told apart by pointer, as a lister returns one object for
// each version it holds.
type NamespaceObjects struct {
	mu sync.Mutex
	m  map[*corev1.Namespace]map[string]any
}

// namespaceObjectsMax bounds what NamespaceObjects holds.
const namespaceObjectsMax = 256

// Of is ns as namespaceObject holds it; a nil NamespaceObjects converts it
// each time.
func (n *NamespaceObjects) Of(ns *corev1.Namespace) (map[string]any, error) {
	if n == nil {
		return NamespaceObject(ns)
	}
	n.mu.Lock()
	m, ok := n.m[ns]
	n.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err := NamespaceObject(ns)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil || len(n.m) >= namespaceObjectsMax {
		n.m = make(map[*corev1.Namespace]map[string]any, namespaceObjectsMax)
	}
	n.m[ns] = m
	return m, nil
}
