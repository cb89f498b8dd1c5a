package celenv

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestNewInput: the input of an event, as the controller, render and diff
// give it to a policy.
func TestNewInput(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "ns", "uid": "u1"}}}
	old := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "a"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	tests := []struct {
		name            string
		ev              Event
		object, oldObj  map[string]any
		namespaceObject bool
	}{
		{name: "a CREATE has the object", ev: Event{Operation: "CREATE", Object: cm}, object: cm.Object},
		{name: "an UPDATE has the state before", ev: Event{Operation: "UPDATE", Object: cm, OldObject: old}, object: cm.Object, oldObj: old.Object},
		{name: "a DELETE has the last state as oldObject", ev: Event{Operation: "DELETE", Object: cm}, oldObj: cm.Object},
		{name: "a Namespace is a whole object", ev: Event{Operation: "CREATE", Object: cm, Namespace: ns}, object: cm.Object, namespaceObject: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := NewInput(tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			if (in.Object == nil) != (tt.object == nil) || (in.OldObject == nil) != (tt.oldObj == nil) {
				t.Errorf("object %v, oldObject %v; want %v, %v", in.Object, in.OldObject, tt.object, tt.oldObj)
			}
			r := in.Request
			if r.UID != "u1" || r.Operation != tt.ev.Operation || r.Name != "a" || r.Namespace != "ns" || r.Kind.Kind != "ConfigMap" {
				t.Errorf("request %+v", r)
			}
			if !tt.namespaceObject {
				if in.NamespaceObject != nil {
					t.Errorf("namespaceObject %v for no Namespace", in.NamespaceObject)
				}
				return
			}
			got := &unstructured.Unstructured{Object: in.NamespaceObject}
			if got.GetAPIVersion() != "v1" || got.GetKind() != "Namespace" || got.GetLabels()["team"] != "a" || got.GetManagedFields() != nil {
				t.Errorf("namespaceObject %v: want a v1 Namespace with its labels, without managedFields", in.NamespaceObject)
			}
		})
	}
}
