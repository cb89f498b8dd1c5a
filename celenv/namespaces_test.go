package celenv

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Namespace version is converted once, a new version again, and what is
// held stays bounded.
func TestNamespaceObjectsConvertEachVersionOnce(t *testing.T) {
	var n NamespaceObjects
	v1 := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", ResourceVersion: "1", Labels: map[string]string{"tier": "a"}}}
	a, err := n.Of(v1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := n.Of(v1)
	if reflect.ValueOf(a).Pointer() != reflect.ValueOf(b).Pointer() {
		t.Error("one Namespace version converted twice")
	}
	if a["kind"] != "Namespace" || a["apiVersion"] != "v1" {
		t.Errorf("namespaceObject lacks its type: %v", a)
	}
	v2 := v1.DeepCopy()
	v2.ResourceVersion, v2.Labels["tier"] = "2", "b"
	c, _ := n.Of(v2)
	if got := c["metadata"].(map[string]any)["labels"].(map[string]any)["tier"]; got != "b" {
		t.Errorf("a new version reads as the old one: tier %v", got)
	}
	for i := range 2 * namespaceObjectsMax {
		if _, err := n.Of(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("ns-", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if len(n.m) > namespaceObjectsMax {
		t.Errorf("holds %d Namespaces, bound %d", len(n.m), namespaceObjectsMax)
	}
	var unset *NamespaceObjects
	if m, err := unset.Of(v1); err != nil || m["kind"] != "Namespace" {
		t.Errorf("a nil NamespaceObjects converts: %v, %v", m, err)
	}
}
