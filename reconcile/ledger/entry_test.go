package ledger

import (
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

var key = policy.Key{Kind: apiv1.GeneratingPolicyKind, Name: "p"}

// compiled is the policy p, from files when created is zero.
func compiled(created, activated time.Time) *policy.Compiled {
	p := &apiv1.GeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-p", CreationTimestamp: metav1.Time{Time: created}}}
	return &policy.Compiled{Policy: p, Activated: activated, Triggers: []schema.GroupVersionResource{configMaps}}
}

// A policy that left has no entry: whatever a sync ending after it asks
// of its nil entry keeps nothing.
func TestNilEntryKeepsNothing(t *testing.T) {
	var e *Entry
	e.Rebuild(true)
	e.Admit("t")
	e.WritesTo(sets.New(configMaps))
	e.NoteGenerated(inventory.ChangeSet{Changes: []inventory.Change{{ID: "ConfigMap/a", TriggerUID: "t", Action: inventory.Created}}})
	if e.Rebuilding() || e.IsAdmitted("t") || e.Written().Len() != 0 || e.Claims("t", "ConfigMap/a") || e.PassedOver(0) {
		t.Error("a nil entry kept something")
	}
}

// Resources named in a record are taken only until the policy's syncs
// record their own.
func TestWrittenFromTheRecordUntilSyncsWrite(t *testing.T) {
	rec := &sproutv1alpha1.PolicyInventory{Spec: sproutv1alpha1.PolicyInventorySpec{Resources: []sproutv1alpha1.Resource{{Version: "v1", Resource: "secrets"}}}}
	var e Entry
	e.WritesTo(sets.New(configMaps))
	e.RestoreWritten(rec)
	if got := e.Written(); !got.Equal(sets.New(configMaps)) {
		t.Errorf("written %v, want the sync's own only", got.UnsortedList())
	}
	var fresh Entry
	fresh.RestoreWritten(rec)
	if got := fresh.Written(); got.Len() != 1 || got.UnsortedList()[0].Resource != "secrets" {
		t.Errorf("written %v, want the record's", got.UnsortedList())
	}
}

// A policy that does not synchronize generates an object once per
// trigger: once created or found, it is not generated again, until its
// trigger is gone.
func TestGeneratedOncePerTrigger(t *testing.T) {
	obj := func(name, trigger string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		u.SetNamespace("default")
		u.SetName(name)
		u.SetLabels(map[string]string{sproutv1alpha1.LabelTriggerUID: trigger})
		return u
	}
	var e Entry
	e.NoteGenerated(inventory.ChangeSet{Changes: []inventory.Change{
		{ID: "ConfigMap/default/a", TriggerUID: "t1", Action: inventory.Created},
		{ID: "ConfigMap/default/b", TriggerUID: "t1", Action: inventory.Failed},
	}})
	left := e.NotYetGenerated([]*unstructured.Unstructured{obj("a", "t1"), obj("b", "t1"), obj("a", "t2")})
	if len(left) != 2 || left[0].GetName() != "b" || left[1].GetLabels()[sproutv1alpha1.LabelTriggerUID] != "t2" {
		t.Fatalf("not yet generated: %v", left)
	}
	e.RetainGenerated(func() sets.Set[string] { return sets.New[string]() }, func(uid string) bool { return uid != "t1" })
	if left := e.NotYetGenerated([]*unstructured.Unstructured{obj("a", "t1")}); len(left) != 1 {
		t.Error("what a gone trigger generated is still remembered")
	}
}

// What a deleted trigger generated is kept while its DELETE waits to be
// generated from.
func TestGeneratedKeptWhileTombstoned(t *testing.T) {
	var e Entry
	e.NoteGenerated(inventory.ChangeSet{Changes: []inventory.Change{{ID: "ConfigMap/default/a", TriggerUID: "t1", Action: inventory.Created}}})
	e.RetainGenerated(func() sets.Set[string] { return sets.New("t1") }, func(string) bool { return false })
	if !e.Claims("t1", "ConfigMap/default/a") {
		t.Error("what a tombstoned trigger generated was forgotten")
	}
}

// A synchronizing policy claims an object whose origin was removed, and
// drops the claim once it no longer wants it; given triggers, only their
// claims are looked at.
func TestClaimsLastWhileWanted(t *testing.T) {
	o := generated(t, key, "default", "a", "t1", false)
	b := generated(t, key, "default", "b", "t2", false)
	gotKey, claim, ok := Departure(o, nil)
	if !ok || gotKey != key {
		t.Fatalf("departure of a deleted object: %v %v", gotKey, ok)
	}
	_, claimB, _ := Departure(b, nil)
	var e Entry
	e.Claim(claim)
	e.Claim(claimB)
	if !e.Claims("t1", "ConfigMap/default/a") {
		t.Fatal("the claim is not kept")
	}
	e.RetainClaims(inventory.ChangeSet{}, sets.New("t1"))
	if e.Claims("t1", "ConfigMap/default/a") || !e.Claims("t2", "ConfigMap/default/b") {
		t.Error("claims retained for the wrong triggers")
	}
	if _, _, ok := Departure(o, o); ok {
		t.Error("an object that kept its origin departed")
	}
	if _, _, ok := Departure(generated(t, key, "default", "c", "t1", true), nil); ok {
		t.Error("an object whose origin was copied departed")
	}
}

// An object labelled as the policy's is its own only when the policy wrote
// it, or its record says it generated it.
func TestGeneratedByNeedsMoreThanLabels(t *testing.T) {
	o := generated(t, key, "default", "a", "t1", false)
	var e Entry
	if e.GeneratedBy(o) {
		t.Fatal("labels alone made an object the policy's")
	}
	e.NoteOwn(inventory.ChangeSet{Changes: []inventory.Change{{ID: o.ID(), Action: inventory.Created}}})
	if !e.GeneratedBy(o) {
		t.Fatal("an object the policy wrote is not its own")
	}
	e.NoteOwn(inventory.ChangeSet{Changes: []inventory.Change{{ID: o.ID(), Action: inventory.Deleted}}})
	if e.GeneratedBy(o) {
		t.Fatal("an object the policy deleted is still its own")
	}
	e.NoteGenerated(inventory.ChangeSet{Changes: []inventory.Change{{ID: o.ID(), TriggerUID: "t1", Action: inventory.Unchanged}}})
	if !e.GeneratedBy(o) {
		t.Error("an object the record names is not the policy's")
	}
	cp := compiled(time.Time{}, time.Now())
	if !LabelledBy(cp, o) || e.MayTriggerItself(cp) {
		t.Error("labelled by: want true; may trigger itself before writing to its triggers: want false")
	}
	e.WritesTo(sets.New(configMaps))
	if !e.MayTriggerItself(cp) {
		t.Error("a policy writing to its trigger resource may not trigger itself")
	}
}

// A lost record is rebuilt from the objects Sprout wrote: their triggers
// still there are admitted, and a policy from files begins with the
// earliest of them; copied labels tell nothing.
func TestRelearnFromTheObjects(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	owned := []*cluster.Object{generated(t, key, "default", "a", "t1", false), generated(t, key, "default", "b", "t2", false),
		generated(t, key, "default", "c", "t3", true), generated(t, key, "default", "d", "gone", false)}
	created := map[types.UID]time.Time{"t1": now.Add(-time.Hour), "t2": now.Add(-2 * time.Hour), "t3": now.Add(-3 * time.Hour)}
	cp := compiled(time.Time{}, now)
	cp.Derives = sproutv1alpha1.DerivedAdmissions{Created: true}
	var e Entry
	began, admitted := e.Relearn(cp, owned, created)
	if !began.Equal(now.Add(-2 * time.Hour)) {
		t.Errorf("began %v, want the earliest proven trigger's creation", began)
	}
	// Begun with t2, the settings admit both t1 and t2 by themselves.
	if admitted != 0 {
		t.Errorf("%d admitted, want none beyond the settings", admitted)
	}
	cp = compiled(now, now)
	began, admitted = e.Relearn(cp, owned, created)
	if !began.IsZero() || admitted != 2 || !e.IsAdmitted("t1") || !e.IsAdmitted("t2") || e.IsAdmitted("t3") {
		t.Errorf("a policy in the cluster: began %v, %d admitted", began, admitted)
	}
}

// The objects a policy owns are found in the resources it wrote to, in
// its namespace only for a namespaced policy, and by trigger.
func TestOwnedIsReadFromTheCaches(t *testing.T) {
	nkey := policy.Key{Kind: apiv1.NamespacedGeneratingPolicyKind, Namespace: "team", Name: "p"}
	mine := generated(t, nkey, "team", "a", "t1", false)
	elsewhere := generated(t, nkey, "other", "b", "t1", false)
	cache := fakeCache{configMaps: {
		watches.ByOwner + "=" + nkey.String():                 {mine, elsewhere},
		watches.ByTrigger + "=" + watches.TriggerBucket("t1"): {mine, elsewhere},
	}}
	core := newFakeCore(nkey)
	l := New(core, cache, nil, nil, slog.New(slog.DiscardHandler))
	if owned, _ := l.Owned(nkey); len(owned) != 0 {
		t.Fatalf("owned before anything was written: %d", len(owned))
	}
	if n, ready := l.Track(t.Context(), nkey, sets.New(configMaps)); n != 1 || !ready {
		t.Fatalf("tracking: %d resources, ready %v", n, ready)
	}
	if owned, err := l.Owned(nkey); err != nil || len(owned) != 1 || owned[0] != mine {
		t.Errorf("owned %v, %v; want the object in its namespace", owned, err)
	}
	if owned, err := l.OwnedBy(nkey, []types.UID{"t1", "t2"}); err != nil || len(owned) != 1 || owned[0] != mine {
		t.Errorf("owned by t1: %v, %v", owned, err)
	}
	holds := l.Holds(nkey)
	if !holds("t1") || holds("t2") {
		t.Errorf("holds t1 %v, t2 %v; want t1's object only", holds("t1"), holds("t2"))
	}
	// Another policy's object for t1, and this one's elsewhere, are not its.
	other := policy.Key{Kind: apiv1.NamespacedGeneratingPolicyKind, Namespace: "team", Name: "q"}
	cache[configMaps][watches.ByTrigger+"="+watches.TriggerBucket("t1")] = []any{generated(t, other, "team", "c", "t1", false), elsewhere}
	if l.Holds(nkey)("t1") {
		t.Error("holds t1 with only another policy's object, and its own outside its namespace")
	}
}

// The last sync of a deleted policy finds its objects live, in the
// resources it wrote to: those in its namespace that name it.
func TestOwnedLiveIsListedFromTheServer(t *testing.T) {
	nkey := policy.Key{Kind: apiv1.NamespacedGeneratingPolicyKind, Namespace: "team", Name: "p"}
	object := func(namespace, name, owner string) runtime.Object {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		u.SetNamespace(namespace)
		u.SetName(name)
		u.SetLabels(map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelPolicyName: "p",
			sproutv1alpha1.LabelPolicyNamespace: "team"})
		u.SetAnnotations(map[string]string{sproutv1alpha1.AnnotationPolicy: owner})
		return u
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{configMaps: "ConfigMapList"},
		object("team", "mine", nkey.String()), object("other", "elsewhere", nkey.String()),
		object("team", "another", "NamespacedGeneratingPolicy/team/q"))
	core := newFakeCore(nkey)
	l := New(core, fakeCache{}, dyn, nil, slog.New(slog.DiscardHandler))
	core.Entry(nkey).WritesTo(sets.New(configMaps))
	owned, err := l.OwnedLive(t.Context(), nkey)
	if err != nil || len(owned) != 1 || owned[0].GetName() != "mine" {
		t.Errorf("owned live: %v, %v; want mine alone", owned, err)
	}
}

// A trigger of the activation second found to predate the policy stays
// before it when a later write raises its version past the policy's, and
// the record carries that across a restart; one found after it stays
// after, as versions only grow.
func TestPredatingTriggerStaysBeforeThePolicy(t *testing.T) {
	activated := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cp := compiled(activated, activated)
	cp.ActivatedVersion = "100"
	var e Entry
	if o := e.Order(cp, "old", activated, "90"); o != policy.Before {
		t.Fatalf("a trigger at version 90 of a policy at 100: %v, want Before", o)
	}
	if o := e.Order(cp, "old", activated, "150"); o != policy.After {
		t.Errorf("a trigger not kept as predating, at version 150: %v, want After", o)
	}
	e.Predate("old")
	if o := e.Order(cp, "old", activated, "150"); o != policy.Before {
		t.Errorf("after a write raised its version: %v, want Before still", o)
	}
	if o := e.Order(cp, "new", activated, "120"); o != policy.After {
		t.Errorf("a trigger at version 120: %v, want After", o)
	}
	var restarted Entry
	restarted.predate(e.predatingList())
	if o := restarted.Order(cp, "old", activated, "150"); o != policy.Before {
		t.Errorf("after a restart from the record: %v, want Before", o)
	}
	e.RetainAdmitted(func(types.UID) bool { return false })
	if len(e.predatingList()) != 0 {
		t.Errorf("a trigger gone is still listed as predating: %v", e.predatingList())
	}
}
