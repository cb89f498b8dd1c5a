package inventory

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sprout-gitops/sprout/cluster"
)

// objectKey identifies an object across API versions of its kind.
type objectKey struct {
	gk              schema.GroupKind
	namespace, name string
}

func keyOf(o *unstructured.Unstructured) objectKey {
	m := metadataStrings(o, "")
	return objectKey{cluster.KindOf(o).GroupKind(), m.get("namespace"), m.get("name")}
}

// cachedKey is keyOf for a cached object.
func cachedKey(o *cluster.Object) objectKey {
	return objectKey{o.GroupVersionKind().GroupKind(), o.GetNamespace(), o.GetName()}
}

// stale returns the owned objects that are not desired: what a
// synchronizing policy prunes. Objects are the same when kind, namespace
// and name are; the API version does not count. Objects generated from a
// trigger's DELETE are never stale: their trigger is gone by design; nor
// are objects whose origin Sprout did not sign (proof.go): labels copied
// onto them never made them the policy's.
// Decisions.Stale finds the same for a round's objects with less work;
// the tests hold the two to each other.
func stale(owned []*cluster.Object, desired []*unstructured.Unstructured) []*cluster.Object {
	want := make(map[objectKey]bool, len(desired))
	for _, d := range desired {
		want[keyOf(d)] = true
	}
	var out []*cluster.Object
	for _, o := range owned {
		if !want[cachedKey(o)] && !o.OnDelete() && o.Proven() {
			out = append(out, o)
		}
	}
	return out
}

// Data returns what a deleted policy takes with it of objs, its objects:
// those that are not clones (it leaves clones, as Kyverno does) and whose
// origin Sprout signed (proof.go).
func Data(objs []*cluster.Object) []*cluster.Object {
	var out []*cluster.Object
	for _, o := range objs {
		if !o.Clone() && o.Proven() {
			out = append(out, o)
		}
	}
	return out
}
