package inventory

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// TestLeft: an object leaves its origin when the labels or the annotation
// that name its policy and trigger change, or when it leaves the cache.
func TestLeft(t *testing.T) {
	cached := func(edit func(labels, annotations map[string]any)) *Cached {
		t.Helper()
		labels := map[string]any{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelPolicyName: "p", sproutv1alpha1.LabelPolicyNamespace: "team", sproutv1alpha1.LabelTriggerUID: "u1"}
		annotations := map[string]any{sproutv1alpha1.AnnotationPolicy: "NamespacedGeneratingPolicy/team/p"}
		if edit != nil {
			edit(labels, annotations)
		}
		c, err := NewCached(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "x", "namespace": "team", "labels": labels, "annotations": annotations},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	was := cached(nil)
	if !was.intact || was.ID() != "ConfigMap/team/x" || was.TriggerUID() != "u1" {
		t.Fatalf("intact %v, ID %q, trigger %q", was.intact, was.ID(), was.TriggerUID())
	}
	for name, c := range map[string]struct {
		next *Cached
		left bool
	}{
		"unchanged":           {cached(nil), false},
		"gone from the cache": {nil, true},
		"policy label":        {cached(func(l, _ map[string]any) { l[sproutv1alpha1.LabelPolicyName] = "q" }), true},
		"namespace label":     {cached(func(l, _ map[string]any) { delete(l, sproutv1alpha1.LabelPolicyNamespace) }), true},
		"trigger label":       {cached(func(l, _ map[string]any) { l[sproutv1alpha1.LabelTriggerUID] = "u2" }), true},
		"annotation":          {cached(func(_, a map[string]any) { delete(a, sproutv1alpha1.AnnotationPolicy) }), true},
		"other label":         {cached(func(l, _ map[string]any) { l["app"] = "x" }), false},
	} {
		if got := was.Left(c.next); got != c.left {
			t.Errorf("%s: Left = %v, want %v", name, got, c.left)
		}
	}
	long := "a-policy-name-much-longer-than-sixty-three-characters-which-labels-cannot-hold"
	if !originIntact("GeneratingPolicy/"+long, sproutv1alpha1.LabelValue(long), "") || originIntact("GeneratingPolicy/p", "p", "team") {
		t.Error("originIntact misjudges an encoded name or a namespace")
	}
}
