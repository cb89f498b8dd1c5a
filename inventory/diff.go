package inventory

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// objectKey identifies an object across API versions of its kind.
type objectKey struct {
	gk              schema.GroupKind
	namespace, name string
}

func keyOf(o *unstructured.Unstructured) objectKey {
	m := metadataStrings(o, "")
	return objectKey{KindOf(o).GroupKind(), m.get("namespace"), m.get("name")}
}

// KindOf returns obj's group, version and kind, read straight from its
// top-level fields: unstructured's accessors walk a path for each, and a
// sync asks for every desired object several times.
func KindOf(obj *unstructured.Unstructured) schema.GroupVersionKind {
	apiVersion, _ := obj.Object["apiVersion"].(string)
	kind, _ := obj.Object["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionKind{Kind: kind}
	}
	return gv.WithKind(kind)
}

// stale returns the owned objects that are not desired: what a
// synchronizing policy prunes. Objects are the same when kind, namespace
// and name are; the API version does not count. Objects generated from a
// trigger's DELETE are never stale: their trigger is gone by design.
// Decisions.Stale finds the same for a round's objects with less work;
// the tests hold the two to each other.
func stale(owned []*Cached, desired []*unstructured.Unstructured) []*Cached {
	want := make(map[objectKey]bool, len(desired))
	for _, d := range desired {
		want[keyOf(d)] = true
	}
	var out []*Cached
	for _, o := range owned {
		if !want[o.key()] && !o.onDelete {
			out = append(out, o)
		}
	}
	return out
}

// Data returns the objects that are not clones: a deleted policy takes its
// data objects with it but leaves clones, as Kyverno does.
func Data(objs []*Cached) []*Cached {
	var out []*Cached
	for _, o := range objs {
		if !o.clone {
			out = append(out, o)
		}
	}
	return out
}
