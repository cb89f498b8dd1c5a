package cluster

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	sigsjson "sigs.k8s.io/json"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
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
	c, err := Generated(nil).FromList(watched(t, applied))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Decode(); !reflect.DeepEqual(got.Object, want.Object) {
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
	if first, second := c.Decode(), c.Decode(); first == second {
		t.Error("two decodings share an object: a caller's edit would reach the next")
	}

	created := appliedConfigMap()
	created.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationUpdate, `{"f:data":{}}`)})
	created.SetLabels(map[string]string{sproutv1alpha1.LabelGeneratedOnDelete: "true", sproutv1alpha1.LabelSourceUID: "src"})
	c, err = Generated(nil).FromList(watched(t, created))
	if err != nil {
		t.Fatal(err)
	}
	if !c.createHeld || !c.onDelete || !c.clone {
		t.Errorf("a created clone from a DELETE: createHeld %v, onDelete %v, clone %v", c.createHeld, c.onDelete, c.clone)
	}
	if mf := c.Decode().GetManagedFields(); mf != nil {
		t.Errorf("managed fields kept: %v", mf)
	}
}

// BenchmarkCacheFootprint measures the memory a downstream cache keeps for
// each generated ConfigMap (8 labels, 2 annotations, two data keys, a
// create's managed fields), as decoded maps (what the cache held before)
// and as Cached, in bytes an object (B/object).
func BenchmarkCacheFootprint(b *testing.B) {
	obj := generatedConfigMap()
	obj.SetUID(types.UID("0b5e3e2a-6a52-4b6f-8a38-7a3c7d1e9f10"))
	obj.SetResourceVersion("1234567")
	obj.SetCreationTimestamp(metav1.Now())
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationUpdate,
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
			c, err := Generated(nil).FromList(u)
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

// TestCachedFromJSONAgreesWithNewCached: an object read from its JSON
// without maps is the object NewCached makes of it decoded, field for field
// and in what its content decodes to, whether its managed fields come last
// (as the API server writes them), first, not at all, or after a field of
// the same name elsewhere in the object.
func TestCachedFromJSONAgreesWithNewCached(t *testing.T) {
	created := appliedConfigMap()
	created.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationUpdate, `{"f:data":{}}`)})
	created.SetLabels(map[string]string{sproutv1alpha1.LabelGeneratedOnDelete: "true", sproutv1alpha1.LabelSourceUID: "src", sproutv1alpha1.LabelTriggerUID: "trigger", sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy})
	bare := appliedConfigMap()
	bare.SetManagedFields(nil)
	nested := appliedConfigMap()
	_ = unstructured.SetNestedField(nested.Object, map[string]any{"managedFields": "not metadata's"}, "data")
	same := appliedConfigMap()
	mf, _, _ := unstructured.NestedFieldCopy(same.Object, "metadata", "managedFields")
	_ = unstructured.SetNestedField(same.Object, mf, "spec", "managedFields")
	for name, tt := range map[string]struct {
		obj  *unstructured.Unstructured
		fast bool // read without maps
	}{
		"applied": {appliedConfigMap(), true}, "created clone": {created, true}, "no managed fields": {bare, true},
		"a field of that name in data": {nested, true}, "the very member in spec too": {same, false},
	} {
		obj := tt.obj
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(obj.Object) // keys sorted: data before metadata, managedFields last but one
			if err != nil {
				t.Fatal(err)
			}
			first := moveManagedFieldsFirst(t, raw)
			for _, raw := range [][]byte{raw, first} {
				var top struct {
					Metadata metadata `json:"metadata"`
				}
				if json.Unmarshal(raw, &top) != nil {
					t.Fatal("no metadata")
				}
				if _, m, err := withoutManagedFields(raw, top.Metadata.ManagedFields); err != nil || (m == nil) != tt.fast {
					t.Errorf("read without maps: %v (%v), want %v", m == nil, err, tt.fast)
				}
				got, err := Generated(nil).FromJSON(raw)
				if err != nil {
					t.Fatal(err)
				}
				want, err := Generated(nil).FromList(watched(t, obj))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got.Decode().Object, want.Decode().Object) {
					t.Errorf("content:\n%s\nwant:\n%s", got.body.Load().content, want.body.Load().content)
				}
				if g, w := readOf(got), readOf(want); g != w {
					t.Errorf("read:\n%+v\nwant:\n%+v", g, w)
				}
			}
		})
	}
	if _, err := Generated(nil).FromJSON([]byte(`{"metadata":`)); err == nil {
		t.Error("truncated JSON read without an error")
	}
}

// cachedRead is what a Cached keeps apart from its content.
type cachedRead struct {
	gvk                                                      schema.GroupVersionKind
	namespace, name, uid, resourceVersion, owner, triggerUID string
	onDelete, clone, createHeld, written, intact             bool
}

func readOf(c *Object) cachedRead {
	return cachedRead{c.kind.Value(), c.namespace, c.name, string(c.uid), c.resourceVersion, c.owner, c.triggerUID, c.onDelete, c.clone, c.createHeld, c.written, c.intact}
}

// moveManagedFieldsFirst returns raw with metadata.managedFields moved to
// the front of metadata, where a client's encoder may put it.
func moveManagedFieldsFirst(t *testing.T, raw []byte) []byte {
	t.Helper()
	var top struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	var md struct {
		ManagedFields json.RawMessage `json:"managedFields"`
	}
	if err := json.Unmarshal(top.Metadata, &md); err != nil || len(md.ManagedFields) == 0 {
		return raw
	}
	member := `"managedFields":` + string(md.ManagedFields)
	rest := strings.Replace(strings.Replace(string(top.Metadata), ","+member, "", 1), member+",", "", 1)
	moved := "{" + member + "," + rest[1:]
	return []byte(strings.Replace(string(raw), string(top.Metadata), moved, 1))
}

// BenchmarkCachedFromWatch measures what a downstream informer does with
// each event's object: decoded into maps and made a Cached (NewCached), or
// read from its JSON (CachedFromJSON).
func BenchmarkCachedFromWatch(b *testing.B) {
	obj := appliedConfigMap()
	obj.SetLabels(map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelPolicyName: "zk", sproutv1alpha1.LabelTriggerName: "team-red",
		sproutv1alpha1.LabelTriggerNamespace: "", sproutv1alpha1.LabelTriggerUID: "0b5e3e2a-6a52-4b6f-8a38-7a3c7d1e9f10", sproutv1alpha1.LabelTriggerKind: "Namespace",
		sproutv1alpha1.LabelTriggerGroup: "", sproutv1alpha1.LabelTriggerVersion: "v1"})
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("maps", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &m); err != nil {
				b.Fatal(err)
			}
			if _, err := Generated(nil).FromList(&unstructured.Unstructured{Object: m}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Generated(nil).FromJSON(slices.Clone(raw)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestMemberSpan: a member is found when it is in raw exactly once,
// whether its key is found first elsewhere or not.
func TestMemberSpan(t *testing.T) {
	member := `"uid":"u1"`
	for _, tt := range []struct {
		raw      string
		from, to int
		ok       bool
	}{
		{`{"uid":"u1","name":"a"}`, 1, 12, true},
		{`{"name":"a","uid":"u1"}`, 11, 22, true},
		{`{"data":{"uid":"x"},"uid":"u1"}`, 19, 30, true},
		{`{"data":{"uid":"u1"},"uid":"u1"}`, 0, 0, false},
		{`{"uid":"u2"}`, 0, 0, false},
		{`{"name":"a"}`, 0, 0, false},
		{`{"uid":"u1"}`, 1, 11, true},
	} {
		from, to, ok := memberSpan([]byte(tt.raw), []byte(member))
		if from != tt.from || to != tt.to || ok != tt.ok {
			t.Errorf("memberSpan(%s) = %d, %d, %v; want %d, %d, %v", tt.raw, from, to, ok, tt.from, tt.to, tt.ok)
		}
	}
}

// TestCachedKnowsWhetherSproutWroteIt: every way a cache makes a Cached
// keeps whether the object's managed fields hold an entry of Sprout's (its
// Apply entry or its create's Update entry), and no more of them.
func TestCachedKnowsWhetherSproutWroteIt(t *testing.T) {
	for name, tt := range map[string]struct {
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		"applied by Sprout":          {[]metav1.ManagedFieldsEntry{managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationApply, `{"f:data":{}}`)}, true},
		"created by Sprout":          {[]metav1.ManagedFieldsEntry{managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationUpdate, `{"f:data":{}}`)}, true},
		"edited by kubectl alone":    {[]metav1.ManagedFieldsEntry{managedBy("kubectl-edit", metav1.ManagedFieldsOperationUpdate, `{"f:data":{}}`)}, false},
		"no managed fields":          {nil, false},
		"Sprout's on a subresource":  {[]metav1.ManagedFieldsEntry{subresource(managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationUpdate, `{"f:status":{}}`))}, false},
		"kubectl and Sprout's apply": {[]metav1.ManagedFieldsEntry{managedBy("kubectl-edit", metav1.ManagedFieldsOperationUpdate, `{"f:data":{}}`), managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationApply, `{"f:data":{}}`)}, true},
	} {
		t.Run(name, func(t *testing.T) {
			obj := appliedConfigMap()
			obj.SetManagedFields(tt.entries)
			fromMaps, err := Generated(nil).FromList(watched(t, obj))
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(obj.Object)
			if err != nil {
				t.Fatal(err)
			}
			fromJSON, err := Generated(nil).FromJSON(raw)
			if err != nil {
				t.Fatal(err)
			}
			typed := &corev1.ConfigMap{}
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
				t.Fatal(err)
			}
			fromProtobuf, err := Generated(nil).identityOf(typed)
			if err != nil {
				t.Fatal(err)
			}
			for how, c := range map[string]*Object{"maps": fromMaps, "JSON": fromJSON, "typed": fromProtobuf} {
				if c.Written() != tt.want {
					t.Errorf("from %s: written %v, want %v", how, c.written, tt.want)
				}
			}
		})
	}
}

func subresource(e metav1.ManagedFieldsEntry) metav1.ManagedFieldsEntry {
	e.Subresource = "status"
	return e
}

// TestLeft: an object leaves its origin when the labels or the annotation
// that name its policy and trigger change, or when it leaves the cache;
// an origin Sprout did not write (copied onto the object) is never left.
func TestLeft(t *testing.T) {
	byManager := func(manager string, edit func(labels, annotations map[string]any)) *Object {
		t.Helper()
		labels := map[string]any{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelPolicyName: "p", sproutv1alpha1.LabelPolicyNamespace: "team", sproutv1alpha1.LabelTriggerUID: "u1"}
		annotations := map[string]any{sproutv1alpha1.AnnotationPolicy: "NamespacedGeneratingPolicy/team/p"}
		if edit != nil {
			edit(labels, annotations)
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "x", "namespace": "team", "labels": labels, "annotations": annotations},
		}}
		obj.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy(manager, metav1.ManagedFieldsOperationUpdate, originFieldsV1)})
		c, err := Generated(nil).FromList(obj)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cached := func(edit func(labels, annotations map[string]any)) *Object {
		t.Helper()
		return byManager(sproutv1alpha1.FieldManager, edit)
	}
	was := cached(nil)
	if !was.intact || !was.OriginWritten() || was.ID() != "ConfigMap/team/x" || was.TriggerUID() != "u1" {
		t.Fatalf("intact %v, origin written %v, ID %q, trigger %q", was.intact, was.OriginWritten(), was.ID(), was.TriggerUID())
	}
	if copied := byManager("tenant", nil); copied.Left(nil) {
		t.Error("an object whose origin someone else wrote left it")
	}
	for name, c := range map[string]struct {
		next *Object
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

// runtimeConvert converts obj to typed, as a protobuf decoder would give
// it.
func runtimeConvert(obj *unstructured.Unstructured, typed k8sruntime.Object) error {
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
		return err
	}
	typed.GetObjectKind().SetGroupVersionKind(obj.GroupVersionKind())
	return nil
}

// The informers ask every event's key through meta.Accessor, several times
// over: it must answer from the Object without allocating.
func TestKeysOfAnObjectAllocateNothing(t *testing.T) {
	raw, err := json.Marshal(generatedConfigMap().Object)
	if err != nil {
		t.Fatal(err)
	}
	o, err := Generated(nil).FromJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	m, err := meta.Accessor(o)
	if err != nil {
		t.Fatal(err)
	}
	if m.GetNamespace() != "team-00000" || m.GetName() != "zk-00000" || m.GetUID() != o.GetUID() || m.GetResourceVersion() != o.GetResourceVersion() {
		t.Errorf("meta.Accessor gives %s/%s %s %s, want the Object's", m.GetNamespace(), m.GetName(), m.GetUID(), m.GetResourceVersion())
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := meta.Accessor(o); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("meta.Accessor allocates %v times, want 0", n)
	}
}
