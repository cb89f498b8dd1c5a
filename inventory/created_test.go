package inventory

import (
	"context"
	"net/http"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
)

// watchedJSON is obj as the API server has it now, in JSON with its
// managed fields, as a watch event carries it.
func watchedJSON(t *testing.T, c client.Client, obj *unstructured.Unstructured) []byte {
	t.Helper()
	_, live := cached(t, c, obj)
	raw, err := live.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestCreatedVersionsAreCachedReleased: the version a create made as
// desired is cached without its JSON. The same desired state then needs no
// request; another one is decided from a read, so that a field the policy
// dropped is still removed from the object; another policy's desired
// object is not written over it; and the object can still be pruned.
func TestCreatedVersionsAreCachedReleased(t *testing.T) {
	ctx := context.Background()
	a, reqs, c := countingApplier(t)
	namespace(t, c, "released")

	obj := generated("released", "zk", map[string]any{"a": "1", "b": "2"})
	created := obj.DeepCopy()
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{created}, cachedObjects{}, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Created) != 1 {
		t.Fatalf("create: %v %+v", err, cs.Changes)
	}
	reqs.take()
	watchedCopy := watchedJSON(t, c, obj)
	form := cluster.Generated(a.creates.(*cluster.CreatedVersions))
	cachedCopy, err := form.FromJSON(slices.Clone(watchedCopy))
	if err != nil {
		t.Fatal(err)
	}
	holds, ok := cachedCopy.Released()
	if stamp := created.GetAnnotations()[sproutv1alpha1.AnnotationApplied]; !ok || holds != stamp {
		t.Fatalf("the created version is cached released %v, holding %q; want released, holding %q", ok, holds, stamp)
	}
	if again, err := form.FromJSON(watchedCopy); err != nil {
		t.Fatal(err)
	} else if _, ok := again.Released(); ok {
		t.Error("the created version is still remembered after its watch event")
	}
	live := cachedObjects{obj.GetName(): cachedCopy}

	// The same state, evaluated anew: no request.
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, live, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Unchanged) != 1 {
		t.Fatalf("unchanged: %v %+v", err, cs.Changes)
	}
	if by := reqs.take(); len(by) != 0 {
		t.Errorf("the state a released copy holds sent %v, want nothing", by)
	}
	// A policy that does not synchronize leaves it.
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, live, ApplyOptions{}); err != nil || cs.Count(Skipped) != 1 {
		t.Fatalf("without synchronize: %v %+v", err, cs.Changes)
	}

	// Another policy's object by that name: read, and not written.
	theirs := generated("released", "zk", map[string]any{"a": "1", "b": "2"})
	Label(theirs, Origin{Policy: "GeneratingPolicy/other", PolicyName: "other", Trigger: ObjectRef{GVK: obj.GroupVersionKind(), Name: "t", UID: "uid-t"}})
	cs, err := a.Apply(ctx, []*unstructured.Unstructured{theirs}, live, ApplyOptions{Synchronize: true})
	if err != nil || cs.Count(Skipped) != 1 || cs.Changes[0].Owner != "GeneratingPolicy/handoff" {
		t.Fatalf("another policy's: %v %+v", err, cs.Changes)
	}
	if by := reqs.take(); by[http.MethodGet] != 1 || len(by) != 1 {
		t.Errorf("another policy's object over a released copy sent %v, want one GET", by)
	}

	// The policy drops b: read, handed over and applied without it.
	obj = generated("released", "zk", map[string]any{"a": "1"})
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, live, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Configured) != 1 {
		t.Fatalf("drop b: %v %+v", err, cs.Changes)
	}
	if by := reqs.take(); by[http.MethodPost] != 0 || by[http.MethodPatch] != 2 {
		t.Errorf("dropping a field over a released copy sent %v, want reads and the hand-over's and the apply's patches, no create", by)
	}
	_, full := cached(t, c, obj)
	if data, _, _ := unstructured.NestedStringMap(full.Object, "data"); len(data) != 1 || data["a"] != "1" {
		t.Errorf("after the policy dropped b, data = %v, want only a", data)
	}

	// What is kept of the created version judges that version alone: the
	// object changed since, and is not pruned from it.
	cs, err = a.Prune(ctx, cluster.Decoded([]*cluster.Object{cachedCopy}))
	if err != nil || cs.Count(Skipped) != 1 {
		t.Fatalf("prune from the created version: %v %+v", err, cs.Changes)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), full); err != nil {
		t.Fatalf("pruned from a version it no longer has: %v", err)
	}

	// Another object, pruned from what is kept of it as created.
	gone := generated("released", "zp", map[string]any{"a": "1"})
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{gone.DeepCopy()}, cachedObjects{}, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Created) != 1 {
		t.Fatalf("create: %v %+v", err, cs.Changes)
	}
	released, err := form.FromJSON(watchedJSON(t, c, gone))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := released.Released(); !ok {
		t.Fatal("the created version is not cached released")
	}
	cs, err = a.Prune(ctx, cluster.Decoded([]*cluster.Object{released}))
	if err != nil || cs.Count(Deleted) != 1 || cs.Changes[0].TriggerUID != "uid-released" {
		t.Fatalf("prune: %v %+v", err, cs.Changes)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(gone), full); !apierrors.IsNotFound(err) {
		t.Errorf("after the prune, get: %v, want NotFound", err)
	}
}

// TestFoundUnchangedReleasesTheCachedCopy: a round that compared a cached
// copy with the desired object and found it unchanged releases it when
// the object settles; the next round decides it unchanged all the same.
func TestFoundUnchangedReleasesTheCachedCopy(t *testing.T) {
	obj := generated("ns", "found", map[string]any{"a": "1"})
	Stamp(obj)
	live := cachedObjects{obj.GetName(): toCache(obj)}
	memo := NewDecisions()
	r := memo.Begin()
	if cs, err := (&Applier{}).Apply(context.Background(), []*unstructured.Unstructured{obj}, live, ApplyOptions{Synchronize: true, Round: r}); err != nil || cs.Count(Unchanged) != 1 {
		t.Fatalf("compare: %v %+v", err, cs.Changes)
	}
	if _, ok := live[obj.GetName()].Released(); ok {
		t.Fatal("released before the object settled")
	}
	if s := r.Settle([]*unstructured.Unstructured{obj}); s[0].Len() != 1 {
		t.Fatal("not settled")
	}
	r.End()
	if holds, ok := live[obj.GetName()].Released(); !ok || holds != obj.GetAnnotations()[sproutv1alpha1.AnnotationApplied] {
		t.Errorf("after settling, released %v holding %q", ok, holds)
	}
	again := obj.DeepCopy() // evaluated anew: no memo of it
	if cs, err := (&Applier{}).Apply(context.Background(), []*unstructured.Unstructured{again}, live, ApplyOptions{Synchronize: true, Round: memo.Begin()}); err != nil || cs.Count(Unchanged) != 1 {
		t.Fatalf("again: %v %+v", err, cs.Changes)
	}
}
