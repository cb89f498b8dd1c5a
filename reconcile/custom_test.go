package reconcile_test

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.sprout.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.sprout.dev",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"size":  {Type: "integer"},
							"color": {Type: "string"},
						}},
					},
				}},
			}},
		},
	}
	ext := apiextensionsclient.NewForConfigOrDie(cfg)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	poll(t, "the CRD to be established", func(ctx context.Context) (bool, error) {
		got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
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
