package watches

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/cluster"
)

// object is a ConfigMap as the informers' caches hold it.
func object(t *testing.T, name, version, data string, labels string) *cluster.Object {
	t.Helper()
	raw := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns","uid":"uid-%s","resourceVersion":%q,"labels":{%s},"annotations":{"sprout.dev/policy":"GeneratingPolicy/p"}},"data":{"v":%q},"status":{"s":%q}}`,
		name, name, version, labels, data, version)
	o, err := cluster.Triggers.FromJSON([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// recorded is a TriggerHandler that keeps what it is told.
type recorded struct{ events []string }

func (r *recorded) Event(w Key, op admission.Operation, obj, old *cluster.Object) {
	was := ""
	if old != nil {
		was = " was " + old.GetResourceVersion()
	}
	r.events = append(r.events, fmt.Sprintf("%s %q %s@%s%s", w.GVR.Resource, op, obj.GetName(), obj.GetResourceVersion(), was))
}

func (r *recorded) Listed(w Key) { r.events = append(r.events, "listed "+w.String()) }

// TestTriggerEventsAreAdmissionEvents: the informers' events reach the
// handler as the admission events a webhook would have seen: nothing for
// what the first list holds or a re-list, CREATE, UPDATE with the state
// before it, "" for a write of status alone, DELETE from a tombstone too.
func TestTriggerEventsAreAdmissionEvents(t *testing.T) {
	h := &recorded{}
	tr := NewTriggers(nil, nil, nil, slog.New(slog.DiscardHandler), h)
	w := Key{GVR: configMaps}
	ti := &informer{}
	ev := tr.events(w, ti).(cache.ResourceEventHandlerDetailedFuncs)
	v1, v2 := object(t, "a", "1", "x", ""), object(t, "a", "2", "y", "")
	status := object(t, "a", "3", "y", "")
	ev.AddFunc(object(t, "listed", "1", "x", ""), true)
	ev.AddFunc(v1, false)
	ev.UpdateFunc(v1, v1)
	ev.UpdateFunc(v1, v2)
	ev.UpdateFunc(v2, status)
	ev.DeleteFunc(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: status})
	want := []string{
		`configmaps "CREATE" a@1`,
		`configmaps "UPDATE" a@2 was 1`,
		`configmaps "" a@3 was 2`,
		`configmaps "DELETE" a@3`,
	}
	if !slices.Equal(h.events, want) {
		t.Errorf("events:\n%q\nwant\n%q", h.events, want)
	}
	if n := ti.objects.Load(); n != 1 {
		t.Errorf("objects counted %d, want 1 (two added, one deleted)", n)
	}
}

// TestGeneratedIndexes: a generated object is indexed by the owner its
// annotation names, exactly, and by its trigger's bucket, which every
// object of that trigger shares.
func TestGeneratedIndexes(t *testing.T) {
	o := object(t, "a-out", "1", "x", `"generate.kyverno.io/trigger-uid":"t1"`)
	owner, _ := ownerIndex(o)
	trigger, _ := triggerIndex(o)
	if !slices.Equal(owner, []string{"GeneratingPolicy/p"}) || !slices.Equal(trigger, []string{TriggerBucket("t1")}) {
		t.Errorf("indexed by %q and %q", owner, trigger)
	}
	none, _ := triggerIndex(object(t, "b-out", "1", "x", ""))
	if none != nil {
		t.Errorf("an object without a trigger indexed under %q", none)
	}
	if TriggerBucket("t1") == TriggerBucket("t2") && TriggerBucket("t2") == TriggerBucket("t3") {
		t.Error("every trigger in one bucket")
	}
}

// TestReleaseStopsWhatIsNotNeeded: Release stops every informer the set
// it is given leaves out, and keeps those it holds; what was kept of an
// object's last update goes with its informer.
func TestReleaseStopsWhatIsNotNeeded(t *testing.T) {
	tr := NewTriggers(nil, nil, nil, slog.New(slog.DiscardHandler), &recorded{})
	kept, gone := Key{GVR: configMaps}, Key{GVR: configMaps, Namespace: "ns"}
	stopped := map[Key]bool{}
	for _, k := range []Key{kept, gone} {
		tr.informers[k] = &informer{cancel: func() { stopped[k] = true }}
	}
	tr.SetLastUpdate(kept, "u1", object(t, "a", "1", "x", ""))
	tr.Release(sets.New(kept))
	if stopped[kept] || !stopped[gone] || !slices.Equal(tr.Keys(), []Key{kept}) {
		t.Errorf("stopped %v, running %v", stopped, tr.Keys())
	}
	if tr.LastUpdate(kept, "u1") == nil || tr.LastUpdate(gone, "u1") != nil {
		t.Error("the last update kept in the wrong informer")
	}
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// TestLiveAnswersForWhatItDoesNotWatch: a kind whose objects no informer
// holds, or that maps to no resource, is never found, and any version
// counts as seen: an object of it is written, and a create that finds it
// is told so.
func TestLiveAnswersForWhatItDoesNotWatch(t *testing.T) {
	g := NewGenerated(nil, nil, new(cluster.CreatedVersions), nil, func(schema.GroupVersionResource) bool { return false }, slog.New(slog.DiscardHandler), nil)
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	for name, resource := range map[string]func(schema.GroupVersionKind) (schema.GroupVersionResource, error){
		"not watched": func(schema.GroupVersionKind) (schema.GroupVersionResource, error) { return configMaps, nil },
		"not served": func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
			return schema.GroupVersionResource{}, fmt.Errorf("no matches for kind %q", gvk.Kind)
		},
	} {
		live := g.Live(resource)
		if o, ok := live.Get(cm, "ns", "a"); ok || o != nil {
			t.Errorf("%s: found %v", name, o)
		}
		if !live.Seen(cm, "42") {
			t.Errorf("%s: a version not seen", name)
		}
	}
}

// TestWaitSyncedIsWokenByTheList: a wait for the generated objects' caches
// ends when their informer has listed, woken by the list rather than by a
// poll, and at once for a resource no informer watches, which no wait
// would see listed (it waited out its whole bound before).
func TestWaitSyncedIsWokenByTheList(t *testing.T) {
	g := NewGenerated(nil, nil, new(cluster.CreatedVersions), nil, func(schema.GroupVersionResource) bool { return false }, slog.New(slog.DiscardHandler), nil)
	released := make(chan struct{})
	inf := cache.NewSharedIndexInformer(listOnly{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			select {
			case <-released:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &metav1.List{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewFake(), nil
		},
	}}, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	g.informers[configMaps] = &informer{informer: inf, cancel: cancel}
	go inf.RunWithContext(ctx)

	unwatched := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	done := make(chan bool, 1)
	go func() { done <- g.WaitSynced(ctx, sets.New(configMaps, unwatched), time.Hour) }()
	select {
	case synced := <-done:
		if synced {
			t.Error("a resource no informer watches is synced")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("waited for a resource no informer watches")
	}

	go func() { done <- g.WaitSynced(ctx, sets.New(configMaps), time.Hour) }()
	close(released)
	select {
	case synced := <-done:
		if !synced {
			t.Error("not synced once listed")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not end when the informer listed")
	}

	// Every later sync asks again of caches that have listed: it is
	// answered at once, without a goroutine or a timer to wait for them.
	listed := sets.New(configMaps)
	if n := testing.AllocsPerRun(10, func() { g.WaitSynced(ctx, listed, time.Hour) }); n != 0 {
		t.Errorf("a wait for caches that have listed allocates %v times", n)
	}
}

// listOnly lists, then watches, rather than asking a watch for the list.
type listOnly struct{ *cache.ListWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }
