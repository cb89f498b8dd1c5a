package cluster

import (
	"maps"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestOwnStringsReadsAsGetLabelsAndCopies: OwnStrings reads the map as
// GetLabels does, and never writes into the one obj held, which an
// expression may share with a trigger.
func TestOwnStringsReadsAsGetLabelsAndCopies(t *testing.T) {
	shared := map[string]any{"role": "copy", "empty": nil}
	for name, c := range map[string]struct {
		object map[string]any
		want   map[string]any // nil: nothing can be set
	}{
		"shared":      {map[string]any{"metadata": map[string]any{"labels": shared}}, map[string]any{"role": "copy", "empty": ""}},
		"no metadata": {map[string]any{}, map[string]any{}},
		"nil object":  {nil, map[string]any{}},
		"not strings": {map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "b", "n": int64(1)}}}, map[string]any{}},
		"not a map":   {map[string]any{"metadata": map[string]any{"labels": "x"}}, map[string]any{}},
		"bad meta":    {map[string]any{"metadata": "x"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: c.object}
			var before map[string]string
			if c.want != nil {
				before = obj.GetLabels()
			}
			got := OwnStrings(obj, "labels", 1)
			if c.want == nil {
				if got != nil {
					t.Fatalf("got %v for metadata that is not a map", got)
				}
				return
			}
			if !maps.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			if after := obj.GetLabels(); len(after) != len(before) || (len(before) > 0 && !maps.Equal(after, before)) {
				t.Fatalf("GetLabels read %v before and %v after", before, after)
			}
			got["added"] = "yes"
			if Label(obj, "added") != "yes" {
				t.Fatal("the map returned is not the object's")
			}
		})
	}
	if _, ok := shared["added"]; ok || shared["empty"] != nil {
		t.Fatalf("the shared map was written to: %v", shared)
	}
}
