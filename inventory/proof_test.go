package inventory

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
)

// TestDecideOwnerAsksWhoWroteTheOrigin: an object that carries the
// desired object's origin labels is the policy's to write only when
// Sprout wrote them; a copy is named NotOwned. A claim of the record
// still takes it, and an object Sprout wrote still adopts.
func TestDecideOwnerAsksWhoWroteTheOrigin(t *testing.T) {
	desired := generated("team-red", "zk", map[string]any{"a": "1"})
	labels, annotations := metadataStrings(desired, "labels"), metadataStrings(desired, "annotations")
	claimed := func(string, string) bool { return true }
	for name, tt := range map[string]struct {
		wrote sproutWrote
		opts  ApplyOptions
		write bool
	}{
		"origin written by Sprout":                  {sproutWrote{object: true, origin: true}, ApplyOptions{Synchronize: true}, true},
		"origin copied by a tenant":                 {sproutWrote{}, ApplyOptions{Synchronize: true}, false},
		"origin copied onto an object Sprout wrote": {sproutWrote{object: true}, ApplyOptions{Synchronize: true}, true},
		"origin copied, claimed by the record":      {sproutWrote{}, ApplyOptions{Synchronize: true, Claimed: claimed}, true},
		"origin copied, a trigger that is gone": {sproutWrote{}, ApplyOptions{Synchronize: true,
			Alive: func(string) bool { return false }}, false},
	} {
		t.Run(name, func(t *testing.T) {
			d := decideOwner(desired, labels, annotations, tt.wrote, tt.opts)
			if written := d.action == ""; written != tt.write {
				t.Errorf("decision %+v: written %v, want %v", d, written, tt.write)
			}
			if !tt.write && d.reason != reasonCopiedOrigin {
				t.Errorf("reason %q, want %q", d.reason, reasonCopiedOrigin)
			}
		})
	}
}

// TestCopiedOriginIsNeverWrittenNorPruned: a tenant creates their own
// object carrying a policy's origin labels and annotation, as they may
// patch them onto any object they can write. Sprout neither writes over
// it, read from the API server or from the cache, nor counts it among the
// objects a policy prunes (Decisions.Stale, stale, Data) or rebuilds its
// record from (Proven); the policy's own object still is. A client that
// names itself Sprout's field manager is taken for Sprout: that is the
// limit of what managed fields can tell.
func TestCopiedOriginIsNeverWrittenNorPruned(t *testing.T) {
	ctx := context.Background()
	a, _, c := countingApplier(t)
	namespace(t, c, "copied-origin")
	sync := ApplyOptions{Synchronize: true}

	ours := generated("copied-origin", "ours", map[string]any{"a": "1"})
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{ours.DeepCopy()}, cachedObjects{}, sync); err != nil || cs.Count(Created) != 1 {
		t.Fatalf("create: %v %+v", err, cs.Changes)
	}
	theirs := generated("copied-origin", "theirs", map[string]any{"a": "theirs"})
	if err := c.Create(ctx, theirs.DeepCopy(), client.FieldOwner("tenant")); err != nil {
		t.Fatal(err)
	}
	desired := generated("copied-origin", "theirs", map[string]any{"a": "1"})

	// Not cached: the create finds it, and the read's managed fields tell.
	cs, err := a.Apply(ctx, []*unstructured.Unstructured{desired.DeepCopy()}, cachedObjects{}, sync)
	if err != nil || cs.Count(Skipped) != 1 || cs.Changes[0].Reason != reasonCopiedOrigin || cs.NotOwned() == "" {
		t.Fatalf("apply over the copied origin, not cached: %v %+v", err, cs.Changes)
	}
	// Cached.
	live, _ := cached(t, c, theirs)
	cs, err = a.Apply(ctx, []*unstructured.Unstructured{desired.DeepCopy()}, live, sync)
	if err != nil || cs.Count(Skipped) != 1 || cs.Changes[0].Reason != reasonCopiedOrigin {
		t.Fatalf("apply over the copied origin, cached: %v %+v", err, cs.Changes)
	}
	if _, now := cached(t, c, theirs); now.Object["data"].(map[string]any)["a"] != "theirs" {
		t.Errorf("the tenant's object was written over: %v", now.Object["data"])
	}

	// Neither desired any longer: only the policy's own object is stale.
	ourLive, _ := cached(t, c, ours)
	theirLive := live
	owned := []*cluster.Object{ourLive[ours.GetName()], theirLive[theirs.GetName()]}
	memo := NewDecisions()
	memo.Begin().End()
	names := func(objs []*cluster.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetName())
		}
		return out
	}
	for how, got := range map[string][]*cluster.Object{
		"Decisions.Stale": memo.Stale(owned), "stale": stale(owned, nil), "Data": Data(owned), "Proven": Proven(owned),
	} {
		if !slices.Equal(names(got), []string{"ours"}) {
			t.Errorf("%s: %v, want the policy's own object alone", how, names(got))
		}
	}

	// Rewritten as field manager sprout, the labels are taken for Sprout's.
	forged := generated("copied-origin", "theirs", map[string]any{"a": "theirs"})
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(forged), client.FieldOwner(sproutv1alpha1.FieldManager), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if forgedLive, _ := cached(t, c, theirs); !forgedLive[theirs.GetName()].OriginWritten() {
		t.Error("labels applied as field manager sprout are not taken for Sprout's: the documented limit changed")
	}
}

// TestHandOverWritesTheOriginAsSprout: an object another controller made
// (Kyverno's, labelled with the policy's name and trigger) is handed over
// as docs/migrating.md says: its origin labels applied server-side as
// field manager sprout. Relabelled with kubectl's own field manager it
// stays NotOwned; handed over, the policy writes it.
func TestHandOverWritesTheOriginAsSprout(t *testing.T) {
	ctx := context.Background()
	a, _, c := countingApplier(t)
	namespace(t, c, "hand-over")
	desired := generated("hand-over", "zk", map[string]any{"a": "1"})
	labels := desired.GetLabels()
	kyvernos := generated("hand-over", "zk", map[string]any{"a": "kyverno"})
	kyvernos.SetLabels(map[string]string{sproutv1alpha1.LabelManagedBy: "kyverno",
		sproutv1alpha1.LabelPolicyName: labels[sproutv1alpha1.LabelPolicyName], sproutv1alpha1.LabelTriggerUID: labels[sproutv1alpha1.LabelTriggerUID]})
	kyvernos.SetAnnotations(nil)
	if err := c.Create(ctx, kyvernos, client.FieldOwner("kyverno")); err != nil {
		t.Fatal(err)
	}
	sync := ApplyOptions{Synchronize: true}

	// kubectl label --overwrite app.kubernetes.io/managed-by=sprout
	relabel := []byte(`{"metadata":{"labels":{"` + sproutv1alpha1.LabelManagedBy + `":"sprout"}}}`)
	if err := c.Patch(ctx, kyvernos.DeepCopy(), client.RawPatch("application/merge-patch+json", relabel), client.FieldOwner("kubectl-label")); err != nil {
		t.Fatal(err)
	}
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{desired.DeepCopy()}, cachedObjects{}, sync); err != nil || cs.NotOwned() == "" {
		t.Fatalf("relabelled with kubectl's field manager: %v %+v", err, cs.Changes)
	}

	// kubectl apply --server-side --force-conflicts --field-manager=sprout
	handOver := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "zk", "namespace": "hand-over", "labels": map[string]any{
			sproutv1alpha1.LabelManagedBy:  sproutv1alpha1.ManagedBy,
			sproutv1alpha1.LabelPolicyName: labels[sproutv1alpha1.LabelPolicyName], sproutv1alpha1.LabelTriggerUID: labels[sproutv1alpha1.LabelTriggerUID],
		}}}}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(handOver), client.FieldOwner(sproutv1alpha1.FieldManager), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{desired.DeepCopy()}, cachedObjects{}, sync); err != nil || cs.Count(Configured) != 1 {
		t.Fatalf("handed over: %v %+v", err, cs.Changes)
	}
	if _, now := cached(t, c, desired); now.Object["data"].(map[string]any)["a"] != "1" {
		t.Errorf("the handed-over object holds %v, want the policy's data", now.Object["data"])
	}
}
