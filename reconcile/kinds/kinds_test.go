package kinds

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

var (
	configMaps = metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: metav1.Verbs{"get", "list", "watch"}},
		{Name: "namespaces", Kind: "Namespace", Verbs: metav1.Verbs{"get", "list", "watch"}},
	}}
	widgets = metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: metav1.Verbs{"get", "list", "watch"}},
	}}
	widget = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
)

func serving(lists ...*metav1.APIResourceList) *fakediscovery.FakeDiscovery {
	d := fake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	d.Resources = lists
	return d
}

// TestKindInstalledLaterIsMapped: a kind discovery did not know when it
// was first asked (a CRD installed since) is mapped at its first lookup
// after, without a resync.
func TestKindInstalledLaterIsMapped(t *testing.T) {
	d := serving(&configMaps)
	k := New(d)
	if m, err := k.Mapping(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}); err != nil || m.Resource.Resource != "configmaps" {
		t.Fatalf("ConfigMap maps to %v, %v", m, err)
	}
	if _, err := k.Mapping(widget); err == nil {
		t.Fatal("a kind not served was mapped")
	}
	d.Resources = []*metav1.APIResourceList{&configMaps, &widgets}
	m, err := k.Mapping(widget)
	if err != nil || m.Resource != (schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}) {
		t.Fatalf("a kind installed later maps to %v, %v", m, err)
	}
	if gvk, err := k.KindFor(m.Resource); err != nil || gvk != widget {
		t.Errorf("its resource maps back to %v, %v", gvk, err)
	}
}

// TestNamespacedIsKnownOnceListed: whether a resource is namespaced is
// known only once a listing has told, and then as discovery says.
func TestNamespacedIsKnownOnceListed(t *testing.T) {
	k := New(serving(&configMaps))
	cms, nss := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	if _, known := k.Namespaced(cms); known {
		t.Error("known before any listing")
	}
	if _, err := k.Resources(); err != nil {
		t.Fatal(err)
	}
	if namespaced, known := k.Namespaced(cms); !namespaced || !known {
		t.Errorf("configmaps: namespaced %v, known %v", namespaced, known)
	}
	if namespaced, known := k.Namespaced(nss); namespaced || !known {
		t.Errorf("namespaces: namespaced %v, known %v", namespaced, known)
	}
}
