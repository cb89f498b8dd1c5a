package globalctx

import (
	"context"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
)

func configMap(namespace, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": namespace}}}
}

// TestStaticServesEntriesFromObjects: an entry read from a file serves, as
// the controller does, the objects given of its resource and namespace in
// namespace and name order, and its projections, which call Kyverno's
// functions; an apiCall entry fails every read; a missing entry is not
// found; an entry given twice or invalid is an error naming it.
func TestStaticServesEntriesFromObjects(t *testing.T) {
	objs := []*unstructured.Unstructured{configMap("teams", "payments"), configMap("other", "x"), configMap("teams", "checkout"),
		{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "namespace": "teams"}}}}
	entry := &v2beta1.GlobalContextEntry{ObjectMeta: metav1.ObjectMeta{Name: "teams"}, Spec: v2beta1.GlobalContextEntrySpec{
		KubernetesResource: &v2beta1.KubernetesResource{Version: "v1", Resource: "configmaps", Namespace: "teams"},
		Projections:        []v2beta1.GlobalContextEntryProjection{{Name: "names", JMESPath: "[].to_upper(metadata.name)"}},
	}}
	apiCall := &v2beta1.GlobalContextEntry{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v2beta1.GlobalContextEntrySpec{
		APICall: &v2beta1.ExternalAPICall{Service: &v2beta1.ServiceCall{URL: "https://example.com"}}}}
	s := NewStatic()
	for _, e := range []*v2beta1.GlobalContextEntry{entry, apiCall} {
		if err := s.AddEntry(e, objs); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	names, found, err := s.Get(ctx, "teams", "names")
	if err != nil || !found || !reflect.DeepEqual(names, []any{"CHECKOUT", "PAYMENTS"}) {
		t.Errorf("projection: %v, %v, %v", names, found, err)
	}
	all, _, err := s.Get(ctx, "teams", "")
	if list, ok := all.([]any); err != nil || !ok || len(list) != 2 {
		t.Errorf("data: %v, %v", all, err)
	}
	if _, found, err := s.Get(ctx, "web", ""); !found || err == nil || !strings.Contains(err.Error(), "not called offline") {
		t.Errorf("apiCall entry: found %v, %v", found, err)
	}
	if v, found, err := s.Get(ctx, "nope", ""); found || v != nil || err != nil {
		t.Errorf("missing entry: %v, %v, %v", v, found, err)
	}
	if err := s.AddEntry(entry, objs); err == nil || !strings.Contains(err.Error(), "GlobalContextEntry teams: given twice") {
		t.Errorf("twice: %v", err)
	}
	bad := &v2beta1.GlobalContextEntry{ObjectMeta: metav1.ObjectMeta{Name: "bad"}}
	if err := s.AddEntry(bad, objs); err == nil || !strings.Contains(err.Error(), "GlobalContextEntry bad: spec.kubernetesResource") {
		t.Errorf("invalid: %v", err)
	}
}

// TestStaticMocks: a mock is read as Kyverno's CLI reads one: the whole
// value, or the key of an object value named by the projection.
func TestStaticMocks(t *testing.T) {
	s := NewStatic()
	value := map[string]any{"items": []any{"a"}}
	if err := s.AddMock("m", value); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMock("m", value); err == nil {
		t.Error("a mock given twice is accepted")
	}
	ctx := context.Background()
	if v, _, err := s.Get(ctx, "m", ""); err != nil || !reflect.DeepEqual(v, value) {
		t.Errorf("whole: %v, %v", v, err)
	}
	if v, _, err := s.Get(ctx, "m", "items"); err != nil || !reflect.DeepEqual(v, []any{"a"}) {
		t.Errorf("projection: %v, %v", v, err)
	}
	if _, _, err := s.Get(ctx, "m", "nope"); err == nil || !strings.Contains(err.Error(), `projection "nope" not found`) {
		t.Errorf("missing projection: %v", err)
	}
}
