package reconcile_test

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// TestCustomResourceDownstreamIsReverted: drift on a downstream of a kind
// from a CRD is seen and reverted like drift on a built-in kind.
func TestCustomResourceDownstreamIsReverted(t *testing.T) {
	ctx := context.Background()
	installCRD(t, "example.sprout.dev", "Widget", &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"size":  {Type: "integer"},
				"color": {Type: "string"},
			}},
		},
	})

	startController(t)
	tb := newTable(t, "widgets")
	doc := derivedPolicy("widgets", "widgets", "w", "one", true, false)
	doc = replaceOnce(t, doc, `"apiVersion": "v1", "kind": "ConfigMap",`, `"apiVersion": "example.sprout.dev/v1", "kind": "Widget",`)
	doc = replaceOnce(t, doc, `"data": {"from": object.data.?value.orValue(""), "policy": "one"}`, `"spec": {"size": 3, "color": object.data.value}`)
	tb.applyPolicy(doc)
	t.Cleanup(func() { tb.deletePolicy("widgets") })
	tb.trigger("a", "widgets", "blue")

	widgets := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "example.sprout.dev", Version: "v1", Resource: "widgets"}).Namespace("widgets")
	spec := func(ctx context.Context) (int64, string, bool) {
		w, err := widgets.Get(ctx, "a-w", metav1.GetOptions{})
		if err != nil {
			return 0, "", false
		}
		size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size")
		color, _, _ := unstructured.NestedString(w.Object, "spec", "color")
		return size, color, true
	}
	poll(t, "the Widget", func(ctx context.Context) (bool, error) {
		size, color, ok := spec(ctx)
		return ok && size == 3 && color == "blue", nil
	})
	if _, err := widgets.Patch(ctx, "a-w", types.MergePatchType, []byte(`{"spec": {"size": 7}}`), metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the Widget to be reverted", func(ctx context.Context) (bool, error) {
		size, _, ok := spec(ctx)
		return ok && size == 3, nil
	})
}
