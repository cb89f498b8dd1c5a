package inventory

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/internal/controlplane"
)

// The package's tests that need an API server share one control plane,
// started by the first of them: fuzzing, which runs none of them in many
// worker processes, must not start one per worker.
var (
	started      sync.Once
	controlPlane *controlplane.ControlPlane
	startErr     error
)

// config returns the shared control plane's config, starting it once.
func config(t *testing.T) *rest.Config {
	t.Helper()
	started.Do(func() { controlPlane, startErr = controlplane.Start() })
	if startErr != nil {
		t.Fatal(startErr)
	}
	return controlPlane.Config
}

func TestMain(m *testing.M) {
	code := m.Run()
	if controlPlane != nil {
		if err := controlPlane.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
		}
	}
	os.Exit(code)
}

// requests counts the requests a client sends for objects, by method;
// discovery is not counted.
type requests struct {
	mu sync.Mutex
	by map[string]int
}

func (r *requests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if strings.Contains(req.URL.Path, "/namespaces/") {
			r.mu.Lock()
			r.by[req.Method]++
			r.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (r *requests) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	by := r.by
	r.by = map[string]int{}
	return by
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// countingApplier returns an Applier whose requests are counted, and a
// plain client to read what it wrote.
func countingApplier(t *testing.T) (*Applier, *requests, client.Client) {
	t.Helper()
	cfg := config(t)
	counted := rest.CopyConfig(cfg)
	r := &requests{by: map[string]int{}}
	counted.Wrap(r.wrap)
	a, err := NewApplier(counted, new(cluster.CreatedVersions), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a, r, c
}

func generated(ns, name string, data map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     data,
	}}
	Label(obj, Origin{Policy: "GeneratingPolicy/handoff", PolicyName: "handoff",
		Trigger: ObjectRef{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: ns, UID: types.UID("uid-" + ns)}})
	return obj
}

func namespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(name)
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

// cached is the controller's cache as it would hold live, read back.
func cached(t *testing.T, c client.Client, obj *unstructured.Unstructured) (cachedObjects, *unstructured.Unstructured) {
	t.Helper()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), live); err != nil {
		t.Fatal(err)
	}
	return cachedObjects{live.GetName(): toCache(live)}, live
}

func managers(obj *unstructured.Unstructured) map[string]bool {
	m := map[string]bool{}
	for _, e := range obj.GetManagedFields() {
		m[e.Manager+"/"+string(e.Operation)] = true
	}
	return m
}

// TestCreatedObjectsHandOverTheirFields: an object Sprout does not have is
// created in one request; its fields, held by the create's Update entry,
// are handed to Sprout's Apply entry by the first apply that follows, so
// that a field removed from the policy later is removed from the object,
// both then and on every apply after.
func TestCreatedObjectsHandOverTheirFields(t *testing.T) {
	ctx := context.Background()
	a, reqs, c := countingApplier(t)
	namespace(t, c, "handoff")

	obj := generated("handoff", "zk", map[string]any{"a": "1", "b": "2"})
	cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, cachedObjects{}, ApplyOptions{Synchronize: true})
	if err != nil || cs.Count(Created) != 1 {
		t.Fatalf("create: %v %+v", err, cs.Changes)
	}
	if by := reqs.take(); by[http.MethodPost] != 1 || len(by) != 1 {
		t.Errorf("creating an absent object sent %v, want one POST", by)
	}
	live, full := cached(t, c, obj)
	if m := managers(full); !m[sproutv1alpha1.FieldManager+"/Update"] {
		t.Fatalf("created object's managers %v, want %s/Update", m, sproutv1alpha1.FieldManager)
	}
	if drifted, err := Drifted(full); err != nil || drifted {
		t.Errorf("created object: Drifted = %v, %v, want false", drifted, err)
	}

	// Unchanged: no request.
	cs, err = a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, live, ApplyOptions{Synchronize: true})
	if err != nil || cs.Count(Unchanged) != 1 {
		t.Fatalf("unchanged: %v %+v", err, cs.Changes)
	}
	if by := reqs.take(); len(by) != 0 {
		t.Errorf("an object as desired sent %v, want nothing", by)
	}

	// The policy drops b: handed over, then applied without it.
	obj = generated("handoff", "zk", map[string]any{"a": "1"})
	if cs, err = a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, live, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Configured) != 1 {
		t.Fatalf("drop b: %v %+v", err, cs.Changes)
	}
	reqs.take()
	live, full = cached(t, c, obj)
	if data, _, _ := unstructured.NestedStringMap(full.Object, "data"); len(data) != 1 || data["a"] != "1" {
		t.Errorf("after the policy dropped b, data = %v, want only a", data)
	}
	if m := managers(full); m[sproutv1alpha1.FieldManager+"/Update"] || !m[sproutv1alpha1.FieldManager+"/Apply"] {
		t.Errorf("after the hand-over, managers %v: want %s/Apply alone", m, sproutv1alpha1.FieldManager)
	}

	// The policy drops a for c: one apply request, a removed.
	obj = generated("handoff", "zk", map[string]any{"c": "3"})
	if cs, err = a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, live, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Configured) != 1 {
		t.Fatalf("a for c: %v %+v", err, cs.Changes)
	}
	if by := reqs.take(); by[http.MethodPatch] != 1 || len(by) != 1 {
		t.Errorf("applying a change to a handed-over object sent %v, want one PATCH", by)
	}
	_, full = cached(t, c, obj)
	if data, _, _ := unstructured.NestedStringMap(full.Object, "data"); len(data) != 1 || data["c"] != "3" {
		t.Errorf("after the policy dropped a, data = %v, want only c", data)
	}
}

// TestCreateNeverTakesAnotherWritersObject: an object by the desired name
// that is not Sprout's is left as it is, although nothing was cached.
func TestCreateNeverTakesAnotherWritersObject(t *testing.T) {
	ctx := context.Background()
	a, reqs, c := countingApplier(t)
	namespace(t, c, "handoff-theirs")
	theirs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "zk", "namespace": "handoff-theirs"},
		"data":     map[string]any{"a": "theirs"},
	}}
	if err := c.Create(ctx, theirs, client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	obj := generated("handoff-theirs", "zk", map[string]any{"a": "ours"})
	cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj}, cachedObjects{}, ApplyOptions{Synchronize: true})
	if err != nil || cs.Count(Skipped) != 1 || cs.NotOwned() == "" {
		t.Fatalf("want skipped as not owned: %v %+v", err, cs.Changes)
	}
	if by := reqs.take(); by[http.MethodPatch] != 0 || by[http.MethodPut] != 0 {
		t.Errorf("another writer's object got %v", by)
	}
	_, full := cached(t, c, obj)
	if data, _, _ := unstructured.NestedStringMap(full.Object, "data"); data["a"] != "theirs" {
		t.Errorf("another writer's object changed: %v", data)
	}
	if m := managers(full); m[sproutv1alpha1.FieldManager+"/Update"] || m[sproutv1alpha1.FieldManager+"/Apply"] {
		t.Errorf("Sprout's manager on another writer's object: %v", m)
	}
}

// TestDriftOfACreatedObjectIsOneApply: a created object another writer
// changed is put back with one apply, its create's fields left where they
// are, since the same desired state drops nothing; the first apply of
// another state hands them over, so that a field the policy dropped goes.
func TestDriftOfACreatedObjectIsOneApply(t *testing.T) {
	ctx := context.Background()
	a, reqs, c := countingApplier(t)
	namespace(t, c, "handoff-drift")
	obj := generated("handoff-drift", "zk", map[string]any{"a": "1", "b": "2"})
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, cachedObjects{}, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Created) != 1 {
		t.Fatalf("create: %v %+v", err, cs.Changes)
	}
	theirs := &unstructured.Unstructured{}
	theirs.SetGroupVersionKind(obj.GroupVersionKind())
	theirs.SetNamespace(obj.GetNamespace())
	theirs.SetName(obj.GetName())
	if err := c.Patch(ctx, theirs, client.RawPatch(types.MergePatchType, []byte(`{"data":{"a":"theirs"}}`)), client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	live, _ := cached(t, c, obj)
	reqs.take()
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, live, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Configured) != 1 {
		t.Fatalf("put back: %v %+v", err, cs.Changes)
	}
	if by := reqs.take(); by[http.MethodPatch] != 1 || len(by) != 1 {
		t.Errorf("putting back a changed field sent %v, want one PATCH", by)
	}
	live, full := cached(t, c, obj)
	if data, _, _ := unstructured.NestedStringMap(full.Object, "data"); data["a"] != "1" {
		t.Errorf("after the put-back, data = %v, want a: 1", data)
	}
	if m := managers(full); !m[sproutv1alpha1.FieldManager+"/Update"] || !m[sproutv1alpha1.FieldManager+"/Apply"] {
		t.Errorf("after the put-back, managers %v: want the create's entry kept beside the apply's", m)
	}

	obj = generated("handoff-drift", "zk", map[string]any{"a": "1"})
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, live, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Configured) != 1 {
		t.Fatalf("drop b: %v %+v", err, cs.Changes)
	}
	if by := reqs.take(); by[http.MethodGet] != 1 || by[http.MethodPatch] != 2 {
		t.Errorf("dropping a field sent %v, want the hand-over's read and patch, then the apply", by)
	}
	_, full = cached(t, c, obj)
	if data, _, _ := unstructured.NestedStringMap(full.Object, "data"); len(data) != 1 || data["a"] != "1" {
		t.Errorf("after the policy dropped b, data = %v, want only a", data)
	}
	if m := managers(full); m[sproutv1alpha1.FieldManager+"/Update"] {
		t.Errorf("after the hand-over, managers %v: want the create's entry gone", m)
	}
}

// TestHandOverFailsOnAChangeAfterItsRead: a write that lands between the
// hand-over's read of the managed fields and its patch fails the patch with
// a conflict, so the fields the read saw never replace newer ones and the
// other writer's change stays; the next apply hands over and applies.
func TestHandOverFailsOnAChangeAfterItsRead(t *testing.T) {
	ctx := context.Background()
	cfg := config(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	namespace(t, c, "handoff-race")
	obj := generated("handoff-race", "zk", map[string]any{"a": "1", "b": "2"})

	// Once armed, another writer labels the object right after Sprout's
	// next read of it.
	var armed atomic.Bool
	racing := rest.CopyConfig(cfg)
	racing.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/configmaps/zk") && armed.CompareAndSwap(true, false) {
				theirs := &unstructured.Unstructured{}
				theirs.SetGroupVersionKind(obj.GroupVersionKind())
				theirs.SetNamespace(obj.GetNamespace())
				theirs.SetName(obj.GetName())
				patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"someone":"was-here"}}}`))
				if err := c.Patch(ctx, theirs, patch, client.FieldOwner("someone")); err != nil {
					t.Errorf("the other writer: %v", err)
				}
			}
			return resp, err
		})
	})
	a, err := NewApplier(racing, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, cachedObjects{}, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Created) != 1 {
		t.Fatalf("create: %v %+v", err, cs.Changes)
	}
	live, _ := cached(t, c, obj)

	armed.Store(true)
	obj = generated("handoff-race", "zk", map[string]any{"a": "1"})
	cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, live, ApplyOptions{Synchronize: true})
	if armed.Load() {
		t.Fatal("the hand-over did not read the object")
	}
	if !apierrors.IsConflict(err) || cs.Count(Failed) != 1 {
		t.Fatalf("a change between the hand-over's read and its patch: %v %+v, want the object failed with a conflict", err, cs.Changes)
	}
	live, full := cached(t, c, obj)
	if full.GetLabels()["someone"] != "was-here" {
		t.Errorf("the other writer's label is gone: %v", full.GetLabels())
	}
	if m := managers(full); !m[sproutv1alpha1.FieldManager+"/Update"] || !m["someone/Update"] {
		t.Errorf("after the failed hand-over, managers %v: want the create's entry and the other writer's", m)
	}

	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, live, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Configured) != 1 {
		t.Fatalf("the next apply: %v %+v", err, cs.Changes)
	}
	_, full = cached(t, c, obj)
	if data, _, _ := unstructured.NestedStringMap(full.Object, "data"); len(data) != 1 || data["a"] != "1" {
		t.Errorf("after the next apply, data = %v, want only a", data)
	}
	if m := managers(full); m[sproutv1alpha1.FieldManager+"/Update"] || !m["someone/Update"] {
		t.Errorf("after the next apply, managers %v: want the create's entry handed over, the other writer's kept", m)
	}
}
