package inventory

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	sigsjson "sigs.k8s.io/json"
)

// watched returns obj as a watch decodes it: numbers as int64, every map
// and string its own.
func watched(t testing.TB, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// TestCachedObjectsKeepAllButTheirManagedFields: a cached object decodes to
// the object as watched less its managed fields, numbers included; what
// syncs read without decoding (identity, version, owner, the labels that
// decide pruning, the mark of a create's fields) agrees with it; and the
// informer's key functions read it.
func TestCachedObjectsKeepAllButTheirManagedFields(t *testing.T) {
	applied := appliedConfigMap()
	want := applied.DeepCopy()
	want.SetManagedFields(nil)
	c, err := NewCached(watched(t, applied))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Object(); !reflect.DeepEqual(got.Object, want.Object) {
		t.Errorf("decoded:\n%v\nwant:\n%v", got.Object, want.Object)
	}
	if c.GroupVersionKind() != (schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}) || c.GetNamespace() != "team-red" ||
		c.GetName() != "zk" || c.GetResourceVersion() != "7" || c.Owner() != "GeneratingPolicy/zk" {
		t.Errorf("read without decoding: %v %s/%s@%s owner %q", c.GroupVersionKind(), c.GetNamespace(), c.GetName(), c.GetResourceVersion(), c.Owner())
	}
	if c.createHeld || c.onDelete || c.clone {
		t.Errorf("an applied data object: createHeld %v, onDelete %v, clone %v", c.createHeld, c.onDelete, c.clone)
	}
	if key, err := cache.MetaNamespaceKeyFunc(c); err != nil || key != "team-red/zk" {
		t.Errorf("informer key %q, %v", key, err)
	}
	if c.Object() == c.Object() {
		t.Error("two decodings share an object: a caller's edit would reach the next")
	}

	created := appliedConfigMap()
	created.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy(FieldManager, metav1.ManagedFieldsOperationUpdate, `{"f:data":{}}`)})
	created.SetLabels(map[string]string{LabelGeneratedOnDelete: "true", LabelSourceUID: "src"})
	c, err = NewCached(watched(t, created))
	if err != nil {
		t.Fatal(err)
	}
	if !c.createHeld || !c.onDelete || !c.clone {
		t.Errorf("a created clone from a DELETE: createHeld %v, onDelete %v, clone %v", c.createHeld, c.onDelete, c.clone)
	}
	if mf := c.Object().GetManagedFields(); mf != nil {
		t.Errorf("managed fields kept: %v", mf)
	}
}

// BenchmarkCacheFootprint measures the memory a downstream cache keeps for
// each generated ConfigMap (8 labels, 2 annotations, two data keys, a
// create's managed fields), as decoded maps (what the cache held before)
// and as Cached, in bytes an object (B/object).
func BenchmarkCacheFootprint(b *testing.B) {
	objects, _ := desiredSet(1)
	obj := objects[0]
	obj.SetUID(types.UID("0b5e3e2a-6a52-4b6f-8a38-7a3c7d1e9f10"))
	obj.SetResourceVersion("1234567")
	obj.SetCreationTimestamp(metav1.Now())
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy(FieldManager, metav1.ManagedFieldsOperationUpdate,
		`{"f:data":{".":{},"f:KAFKA_ADDRESS":{},"f:ZK_ADDRESS":{}},"f:metadata":{"f:annotations":{".":{},"f:sprout.dev/applied":{},"f:sprout.dev/policy":{}},`+
			`"f:labels":{".":{},"f:app.kubernetes.io/managed-by":{},"f:generate.kyverno.io/policy-name":{},"f:generate.kyverno.io/policy-namespace":{},`+
			`"f:generate.kyverno.io/trigger-group":{},"f:generate.kyverno.io/trigger-kind":{},"f:generate.kyverno.io/trigger-namespace":{},`+
			`"f:generate.kyverno.io/trigger-uid":{},"f:generate.kyverno.io/trigger-version":{}}}}`)})
	const n = 10000
	for _, form := range []struct {
		name string
		keep func(*unstructured.Unstructured) any
	}{
		{"map", func(u *unstructured.Unstructured) any { u.SetManagedFields(nil); return u }},
		{"cached", func(u *unstructured.Unstructured) any {
			c, err := NewCached(u)
			if err != nil {
				b.Fatal(err)
			}
			return c
		}},
	} {
		b.Run(form.name, func(b *testing.B) {
			var perObject float64
			for b.Loop() {
				kept := make([]any, n)
				before := heapInUse()
				for i := range kept {
					o := watched(b, obj)
					o.SetName(fmt.Sprint("zk-", i)) // names differ, as in a cache
					kept[i] = form.keep(o)
				}
				perObject = float64(heapInUse()-before) / n
				runtime.KeepAlive(kept)
			}
			b.ReportMetric(perObject, "B/object")
		})
	}
}

// heapInUse is the heap in use after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
