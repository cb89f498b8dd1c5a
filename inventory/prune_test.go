package inventory

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
)

// TestPruneJudgesTheVersionItWasGiven: an object is pruned only at the
// version the decision was made on. One written since (here taken over by
// another trigger, as when a trigger is recreated under its name while a
// cache still shows the old one) is left as it is; one recreated under its
// name too; the current version is pruned.
func TestPruneJudgesTheVersionItWasGiven(t *testing.T) {
	ctx := context.Background()
	a, _, c := countingApplier(t)
	namespace(t, c, "prune-version")

	obj := generated("prune-version", "out", map[string]any{"a": "1"})
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, cachedObjects{}, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Created) != 1 {
		t.Fatalf("create: %v %+v", err, cs.Changes)
	}
	live, _ := cached(t, c, obj)
	old := live[obj.GetName()]

	// Another trigger takes it over: the first one is gone.
	takenOver := obj.DeepCopy()
	Label(takenOver, Origin{Policy: "GeneratingPolicy/handoff", PolicyName: "handoff",
		Trigger: ObjectRef{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: "prune-version", UID: "uid-recreated"}})
	alive := func(uid string) bool { return uid == "uid-recreated" }
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{takenOver}, live, ApplyOptions{Synchronize: true, Alive: alive}); err != nil || cs.Count(Configured) != 1 {
		t.Fatalf("take over: %v %+v", err, cs.Changes)
	}

	cs, err := a.Prune(ctx, cluster.Decoded([]*cluster.Object{old}))
	if err != nil || cs.Count(Skipped) != 1 || cs.Written() {
		t.Fatalf("prune of the version read before the takeover: %v %+v", err, cs.Changes)
	}
	if cs.NotOwned() != "" {
		t.Errorf("an object changed since it was read is reported as someone else's: %s", cs.NotOwned())
	}
	_, now := cached(t, c, obj)
	if uid := now.GetLabels()[sproutv1alpha1.LabelTriggerUID]; uid != "uid-recreated" {
		t.Fatalf("after the prune, the object is labelled for %q, want the trigger that took it over", uid)
	}

	// Recreated under its name: the UID tells, whatever the version.
	if err := c.Delete(ctx, now); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, obj.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	stale := now.DeepCopy()
	stale.SetResourceVersion("")
	if cs, err := a.Prune(ctx, []*unstructured.Unstructured{stale}); err != nil || cs.Count(Skipped) != 1 {
		t.Fatalf("prune of an object recreated since: %v %+v", err, cs.Changes)
	}

	// The version the API server has now is pruned.
	_, current := cached(t, c, obj)
	if cs, err := a.Prune(ctx, []*unstructured.Unstructured{current}); err != nil || cs.Count(Deleted) != 1 {
		t.Fatalf("prune of the current version: %v %+v", err, cs.Changes)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), current); !apierrors.IsNotFound(err) {
		t.Errorf("after the prune, get: %v, want NotFound", err)
	}
}
