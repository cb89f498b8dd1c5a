package cluster

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/internal/controlplane"
)

var cfg *rest.Config

func TestMain(m *testing.M) { controlplane.Main(m, &cfg) }

// listed returns what a watch-list of r sends before its end, by
// namespace/name, as form makes it, and the decoder that read it.
func listed(t *testing.T, r Resource, form Form) (map[string]*Object, watch.Decoder) {
	t.Helper()
	raw, err := NewRawClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	opts := metav1.ListOptions{LabelSelector: "sprout.dev/test=protowatch", SendInitialEvents: &yes,
		AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
	d, err := openWatch(context.Background(), raw, r, opts, form)
	if err != nil {
		t.Fatalf("%s: %v", r.GVR.Resource, err)
	}
	defer d.Close()
	sent := map[string]*Object{}
	for {
		typ, obj, err := d.Decode()
		if err != nil {
			t.Fatalf("%s: %v", r.GVR.Resource, err)
		}
		switch o := obj.(type) {
		case *Object:
			sent[o.GetNamespace()+"/"+o.GetName()] = o
		default:
			if m, err := meta.Accessor(obj); typ == watch.Bookmark && err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				return sent, d
			}
		}
	}
}

// TestProtobufWatchMakesWhatTheJSONWatchMakes: a protobuf watch of a
// built-in resource, read with apimachinery's framing, makes the objects a
// JSON watch makes, field for field, what is read of the managed fields
// included; a resource the API server has no protobuf for (a custom
// resource) is watched in JSON when protobuf is asked for.
func TestProtobufWatchMakesWhatTheJSONWatchMakes(t *testing.T) {
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cfg)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "protowatch", Labels: map[string]string{"sprout.dev/test": "protowatch"}}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	immutable := true
	for i, cm := range []*corev1.ConfigMap{
		{Data: map[string]string{"a": "1", "html": "<b>&</b>", "empty": ""}},
		{BinaryData: map[string][]byte{"bin": {0, 1, 2, 255}}, Immutable: &immutable},
		{},
	} {
		cm.Name, cm.Namespace = fmt.Sprintf("cm-%d", i), "protowatch"
		cm.Labels = map[string]string{"sprout.dev/test": "protowatch", "n": fmt.Sprint(i)}
		cm.Annotations = map[string]string{sproutv1alpha1.AnnotationPolicy: "GeneratingPolicy/x", "note": "ünïcode"}
		manager := "protowatch-test"
		if i == 0 {
			manager = sproutv1alpha1.FieldManager // a create of Sprout's: its entry is read
		}
		if _, err := kube.CoreV1().ConfigMaps("protowatch").Create(ctx, cm, metav1.CreateOptions{FieldManager: manager}); err != nil {
			t.Fatal(err)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "namespaces"},
	} {
		fromJSON, d := listed(t, Resource{GVR: gvr}, Generated(nil))
		if _, ok := d.(*eventDecoder); !ok {
			t.Errorf("%s asked in JSON: read by a %T", gvr.Resource, d)
		}
		fromProtobuf, d := listed(t, Resource{GVR: gvr, Protobuf: true}, Generated(nil))
		if _, ok := d.(*protobufEvents); !ok {
			t.Errorf("%s asked in protobuf: read by a %T", gvr.Resource, d)
		}
		if len(fromJSON) == 0 || len(fromProtobuf) != len(fromJSON) {
			t.Fatalf("%s: %d objects from protobuf, %d from JSON", gvr.Resource, len(fromProtobuf), len(fromJSON))
		}
		for key, want := range fromJSON {
			got := fromProtobuf[key]
			if !equality.Semantic.DeepEqual(got.Decode().Object, want.Decode().Object) {
				t.Errorf("%s %s from protobuf:\n%v\nfrom JSON:\n%v", gvr.Resource, key, got.Decode().Object, want.Decode().Object)
			}
			if g, w := readOf(got), readOf(want); g != w {
				t.Errorf("%s %s read from protobuf:\n%+v\nfrom JSON:\n%+v", gvr.Resource, key, g, w)
			}
		}
		if cm := fromJSON["protowatch/cm-0"]; gvr.Resource == "configmaps" && (cm == nil || !cm.CreateHeld() || !cm.Written()) {
			t.Error("the entry of Sprout's create was not read: the comparison shows nothing of it")
		}
	}

	// A custom resource has no protobuf: its stream is JSON, and read so.
	if _, d := listed(t, Resource{GVR: sproutv1alpha1.PolicyInventories, Protobuf: true}, Generated(nil)); d == nil {
		t.Error("no decoder")
	} else if _, ok := d.(*eventDecoder); !ok {
		t.Errorf("a custom resource asked in protobuf: read by a %T", d)
	}
}

// TestCreatedVersionsArePairedWithTheirEvents: a version a create made as
// desired, reported by the create's answer (CreatedVersions.Created), is
// cached released whether its event comes after the answer (JSON or
// protobuf, when its JSON is never encoded) or before it; a version no
// create reported, or reported once and already paired, is cached whole.
func TestCreatedVersionsArePairedWithTheirEvents(t *testing.T) {
	// version returns a generated object at version rv, its JSON and its
	// typed object, as the two watches give it.
	version := func(rv string) (*unstructured.Unstructured, []byte, *corev1.ConfigMap) {
		t.Helper()
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "zk", "namespace": "team-red", "resourceVersion": rv,
				"annotations": map[string]any{sproutv1alpha1.AnnotationApplied: stamp}},
			"data": map[string]any{"a": "1"},
		}}
		raw, cm := asWatched(t, obj)
		return obj, raw, cm
	}
	check := func(how string, o *Object, err error, released bool) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if holds, ok := o.Released(); ok != released || released && holds != stamp {
			t.Errorf("%s: released %v holding %q, want released %v", how, ok, holds, released)
		}
	}

	created := new(CreatedVersions)
	key := proofKey(t, 1)
	form := Generated(created).WithProof(key)
	obj, raw, _ := version("7")
	created.Created(obj, "7")
	o, err := form.FromJSON(slices.Clone(raw))
	check("JSON after the answer", o, err, true)
	o, err = form.FromJSON(raw)
	check("the same version again", o, err, false)

	obj, _, typed := version("8")
	created.Created(obj, "8")
	o, err = form.fromTyped(typed)
	check("protobuf after the answer", o, err, true)
	if o.body.Load().content != nil {
		t.Error("a version paired at once was encoded")
	}

	obj, raw, _ = version("9")
	early, err := form.FromJSON(raw)
	check("JSON before the answer", early, err, false)
	created.Created(obj, "9")
	check("once the answer came", early, nil, true)

	_, _, typed = version("10")
	o, err = form.fromTyped(typed)
	check("protobuf, no create", o, err, false)

	// A version of Sprout's create made a moment ago may come before the
	// answer: it keeps its typed object, encoded only if read first.
	// Only a version whose proof proves it Sprout's is taken as one: a
	// forged managed-fields entry is encoded at once.
	pending := func(rv string, created time.Time) (*unstructured.Unstructured, *corev1.ConfigMap) {
		t.Helper()
		obj, _, _ := version(rv)
		obj.SetLabels(map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy})
		obj.SetAnnotations(map[string]string{sproutv1alpha1.AnnotationApplied: stamp, sproutv1alpha1.AnnotationPolicy: "GeneratingPolicy/zk"})
		key.Sign(obj)
		_, cm := asWatched(t, obj)
		cm.CreationTimestamp = metav1.NewTime(created)
		cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: sproutv1alpha1.FieldManager,
			Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{}}`)}}
		return obj, cm
	}
	obj, typed = pending("12", time.Now())
	o, err = form.fromTyped(typed)
	check("protobuf before the answer", o, err, false)
	if b := o.body.Load(); b.typed == nil || b.content != nil {
		t.Error("a version whose answer may be on its way was encoded before anyone read it")
	}
	created.Created(obj, "12")
	check("once the answer came", o, nil, true)
	if b := o.body.Load(); b.typed != nil || b.content != nil {
		t.Error("a released version kept its typed object or its JSON")
	}

	obj, typed = pending("13", time.Now())
	o, err = form.fromTyped(typed)
	check("protobuf before the answer, read before it", o, err, false)
	_, eager := pending("13", time.Now())
	want, err := Generated(nil).fromTyped(eager)
	if err != nil {
		t.Fatal(err)
	}
	if want.body.Load().content == nil {
		t.Fatal("a cache that pairs nothing kept a version unencoded")
	}
	if got, w := o.Decode().Object, want.Decode().Object; !equality.Semantic.DeepEqual(got, w) {
		t.Errorf("a pending version decodes as\n%v\nencoded at once as\n%v", got, w)
	}
	if got, w := o.Selectable(true), want.Selectable(true); !equality.Semantic.DeepEqual(got, w) {
		t.Errorf("a pending version's labels %v, encoded at once %v", got.Labels, w.Labels)
	}
	if b := o.body.Load(); b.typed != nil || !bytes.Equal(b.content, want.body.Load().content) {
		t.Error("a pending version read was not kept as the JSON it was read as")
	}
	created.Created(obj, "13")
	check("read, then the answer came", o, nil, true)

	// One no answer pairs (another shard's create) is encoded once it is
	// forgotten, after one to two createdMemory.
	_, typed = pending("15", time.Now())
	unpaired, err := form.fromTyped(typed)
	check("protobuf, another process's create", unpaired, err, false)
	for range 2 {
		created.mu.Lock()
		created.rotated = created.rotated.Add(-2 * createdMemory)
		created.rotate()
		created.mu.Unlock()
	}
	created.encoding.Wait()
	if b := unpaired.body.Load(); b.typed != nil || b.content == nil {
		t.Error("a pending version no answer paired kept its typed object once forgotten")
	}

	_, typed = pending("16", time.Now())
	delete(typed.Annotations, AnnotationProof)
	o, err = form.fromTyped(typed)
	check("protobuf, Sprout's create forged", o, err, false)
	if o.body.Load().content == nil {
		t.Error("a version whose proof does not prove it Sprout's was kept unencoded")
	}

	_, typed = pending("14", time.Now().Add(-2*createdMemory))
	o, err = form.fromTyped(typed)
	check("protobuf, created long ago", o, err, false)
	if o.body.Load().content == nil {
		t.Error("a version created long before (a restart's list) was not encoded as it came")
	}

	obj, raw, _ = version("11")
	created.Created(obj, "11")
	o, err = Generated(nil).FromJSON(raw)
	check("a cache that pairs nothing", o, err, false)
}

// A version created and not cached yet is invisible to a sync that reads
// the cache. Once a later sync of its policy has looked for its trigger's
// objects (Overlook), the version is cached unreleased, so that its
// trigger is looked at again; a version of another policy or trigger, or
// made after that sync began, is released as before.
func TestOverlookedVersionsAreCachedUnreleased(t *testing.T) {
	version := func(rv, policy, trigger string) (*unstructured.Unstructured, []byte, *corev1.ConfigMap) {
		t.Helper()
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "zk-" + rv, "namespace": "team-red", "resourceVersion": rv,
				"labels":      map[string]any{sproutv1alpha1.LabelTriggerUID: trigger},
				"annotations": map[string]any{sproutv1alpha1.AnnotationApplied: stamp, sproutv1alpha1.AnnotationPolicy: policy}},
			"data": map[string]any{"a": "1"},
		}}
		raw, cm := asWatched(t, obj)
		return obj, raw, cm
	}
	created := new(CreatedVersions)
	form := Generated(created)
	made := map[string][]byte{}
	typed := map[string]*corev1.ConfigMap{}
	for _, v := range []struct{ rv, policy, trigger string }{
		{"1", "GeneratingPolicy/zk", "t1"}, {"2", "GeneratingPolicy/zk", "t1"}, {"3", "GeneratingPolicy/zk", "t2"},
		{"4", "GeneratingPolicy/other", "t1"},
	} {
		obj, raw, cm := version(v.rv, v.policy, v.trigger)
		created.Created(obj, v.rv)
		made[v.rv], typed[v.rv] = raw, cm
	}
	since := time.Now()
	obj, raw, _ := version("5", "GeneratingPolicy/zk", "t1")
	created.Created(obj, "5")
	made["5"] = raw
	created.Overlook("GeneratingPolicy/zk", func(uid string) bool { return uid == "t1" }, since)

	for rv, released := range map[string]bool{"1": false, "3": true, "4": true, "5": true} {
		o, err := form.FromJSON(made[rv])
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := o.Released(); ok != released {
			t.Errorf("version %s: released %v, want %v", rv, ok, released)
		}
	}
	o, err := form.fromTyped(typed["2"])
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := o.Released(); ok || o.body.Load().content == nil {
		t.Errorf("version 2, overlooked, from protobuf: released %v; want it cached whole", ok)
	}
}

// A version released on its way from the watch to the cache (its create's
// answer paired with the event before the cache stored it) is invisible
// to a sync that looks in between, and no longer waits for anything that
// would show it to the sync's policy again. Once the cache holds it,
// Cached reports it when such a sync of its policy looked for its
// trigger's objects, whichever of the answer and the event came first,
// and only then.
func TestReleasedVersionsOverlookedOnTheirWayAreReported(t *testing.T) {
	version := func(rv, trigger string) (*unstructured.Unstructured, []byte) {
		t.Helper()
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "zk-" + rv, "namespace": "team-red", "resourceVersion": rv,
				"labels":      map[string]any{sproutv1alpha1.LabelTriggerUID: trigger},
				"annotations": map[string]any{sproutv1alpha1.AnnotationApplied: stamp, sproutv1alpha1.AnnotationPolicy: "GeneratingPolicy/zk"}},
			"data": map[string]any{"a": "1"},
		}}
		raw, _ := asWatched(t, obj)
		return obj, raw
	}
	decode := func(form Form, raw []byte) *Object {
		t.Helper()
		o, err := form.FromJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	created := new(CreatedVersions)
	form := Generated(created)
	inTransit := map[string]*Object{}
	// 1: the answer, then the event; 2: the event, then the answer; 3: the
	// event, cached, then the answer; 4: another trigger's.
	obj, raw := version("1", "t1")
	created.Created(obj, "1")
	inTransit["1"] = decode(form, raw)
	obj, raw = version("2", "t1")
	inTransit["2"] = decode(form, raw)
	created.Created(obj, "2")
	obj, raw = version("3", "t1")
	cachedFirst := decode(form, raw)
	if created.Cached(cachedFirst) {
		t.Error("version 3, cached before its answer came: reported")
	}
	created.Created(obj, "3")
	obj, raw = version("4", "t2")
	created.Created(obj, "4")
	inTransit["4"] = decode(form, raw)
	since := time.Now()
	// 5: made once the sync that overlooks began.
	obj, raw = version("5", "t1")
	created.Created(obj, "5")
	inTransit["5"] = decode(form, raw)

	created.Overlook("GeneratingPolicy/zk", func(uid string) bool { return uid == "t1" }, since)
	for rv, want := range map[string]bool{"1": true, "2": true, "4": false, "5": false} {
		o := inTransit[rv]
		if _, ok := o.Released(); !ok {
			t.Errorf("version %s: not released", rv)
		}
		if got := created.Cached(o); got != want {
			t.Errorf("version %s: reported %v once cached, want %v", rv, got, want)
		}
		if created.Cached(o) {
			t.Errorf("version %s: reported twice", rv)
		}
	}
	if _, ok := cachedFirst.Released(); !ok || created.Cached(cachedFirst) {
		t.Errorf("version 3, cached before its answer came: released %v, want released and not reported", ok)
	}
}

// asWatched returns a generated ConfigMap as the two watches give it: its
// JSON and its typed object.
func asWatched(t *testing.T, obj *unstructured.Unstructured) ([]byte, *corev1.ConfigMap) {
	t.Helper()
	raw, err := obj.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := runtimeConvert(obj, cm); err != nil {
		t.Fatal(err)
	}
	return raw, cm
}
