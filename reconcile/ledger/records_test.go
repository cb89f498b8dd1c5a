package ledger

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// The records' cache keeps no managed fields: nothing reads them, and each
// read of a record copies it.
func TestRecordsAreCachedWithoutManagedFields(t *testing.T) {
	rec := &unstructured.Unstructured{}
	rec.SetName("gpol.zk")
	rec.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "sprout", Operation: metav1.ManagedFieldsOperationApply}})
	got, err := withoutManagedFields(rec)
	if err != nil {
		t.Fatal(err)
	}
	if mf := got.(*unstructured.Unstructured).GetManagedFields(); len(mf) != 0 || got.(*unstructured.Unstructured).GetName() != "gpol.zk" {
		t.Errorf("cached record: managed fields %v, name %q; want none, and the rest kept", mf, got.(*unstructured.Unstructured).GetName())
	}
}

// startRecords gives l records read from a store holding recs, written
// through a fake client that keeps what was applied, and caches it.
func startRecords(t testing.TB, l *Ledger, recs ...*sproutv1alpha1.PolicyInventory) *[]*unstructured.Unstructured {
	applied, _ := startRecordsIn(t, l, recs...)
	return applied
}

// startRecordsIn is startRecords that returns the records' store too.
func startRecordsIn(t testing.TB, l *Ledger, recs ...*sproutv1alpha1.PolicyInventory) (*[]*unstructured.Unstructured, cache.Store) {
	t.Helper()
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, rec := range recs {
		rec.Name = inventory.RecordName(rec.Spec.Policy)
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rec)
		if err != nil {
			t.Fatal(err)
		}
		_ = store.Add(&unstructured.Unstructured{Object: obj})
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{sproutv1alpha1.PolicyInventories: "PolicyInventoryList"})
	var applied []*unstructured.Unstructured
	dyn.PrependReactor("patch", "policyinventories", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(p.GetPatch()); err != nil {
			return true, nil, err
		}
		u.SetResourceVersion("2")
		applied = append(applied, u)
		_ = store.Add(u) // as the informer will
		return true, u, nil
	})
	l.records = inventory.NewRecords(dyn, store, 0)
	return &applied, store
}

// A policy resumes from its record: the resources it wrote to whatever its
// UID, and what events admitted and it generated only when the record is
// of the same policy object; no record, or one being rebuilt, rebuilds.
func TestRestoreFromTheRecord(t *testing.T) {
	derived := sproutv1alpha1.DerivedAdmissions{Created: true}
	rec := &sproutv1alpha1.PolicyInventory{Spec: sproutv1alpha1.PolicyInventorySpec{
		Policy:    sproutv1alpha1.PolicyReference{Kind: key.Kind, Name: key.Name, UID: "uid-p"},
		Resources: []sproutv1alpha1.Resource{{Version: "v1", Resource: "configmaps"}},
		Admitted:  []string{"t1"}, Generated: []string{"t1 ConfigMap/default/a"}, Derived: &derived,
	}}
	l := New(newFakeCore(), fakeCache{}, nil, nil, slog.New(slog.DiscardHandler))
	startRecords(t, l, rec)

	var same Entry
	l.Restore(key, "uid-p", &same)
	if d, ok := same.DerivedBy(); same.Rebuilding() || !same.Written().Has(configMaps) || !same.IsAdmitted("t1") || !same.Claims("t1", "ConfigMap/default/a") || !ok || d != derived {
		t.Error("the same policy did not resume from its record")
	}
	var other Entry
	l.Restore(key, "uid-other", &other)
	if !other.Written().Has(configMaps) || other.IsAdmitted("t1") || other.Claims("t1", "ConfigMap/default/a") {
		t.Error("a policy created again under the name took its predecessor's admissions, or lost its objects")
	}
	var none Entry
	l.Restore(policy.Key{Kind: key.Kind, Name: "new"}, "uid-new", &none)
	if !none.Rebuilding() {
		t.Error("a policy without a record is not rebuilding")
	}
}

// A record is written with what the entry holds, and only when that
// changed; its status is not written before the record exists.
func TestSaveWritesWhatChanged(t *testing.T) {
	l := New(newFakeCore(), fakeCache{}, nil, nil, slog.New(slog.DiscardHandler))
	applied := startRecords(t, l)
	ctx := t.Context()
	cp := compiled(time.Time{}, time.Unix(1000, 0))
	var e Entry
	e.Rebuild(true)
	e.Admit("t1")
	e.WritesTo(sets.New(configMaps))
	if err := l.SaveStatus(ctx, key, cp, report.Outcome{Reason: report.ReasonProgressing}, ""); err != nil || len(*applied) != 0 {
		t.Fatalf("status of a first sync under way: %v, %d writes; want none", err, len(*applied))
	}
	if err := l.Save(ctx, key, cp, &e); err != nil {
		t.Fatal(err)
	}
	if err := l.Save(ctx, key, cp, &e); err != nil {
		t.Fatal(err)
	}
	if len(*applied) != 1 {
		t.Fatalf("%d writes of a record saved twice unchanged, want 1", len(*applied))
	}
	rec, err := inventory.FromUnstructured((*applied)[0])
	if err != nil {
		t.Fatal(err)
	}
	if rec.Labels[LabelRebuilding] != "true" || len(rec.Spec.Admitted) != 1 || len(rec.Spec.Resources) != 1 || rec.Spec.Policy.UID != "uid-p" || rec.Spec.Derived == nil {
		t.Errorf("record written: %+v", rec)
	}
}

// A record deleted while its policy runs queues the policy, whose sync
// writes it again; one of a policy that does not run queues nothing.
func TestRecordDeletedQueuesItsPolicy(t *testing.T) {
	core := newFakeCore(key)
	l := New(core, fakeCache{}, nil, nil, slog.New(slog.DiscardHandler))
	rec := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"policy": map[string]any{"kind": key.Kind, "name": name}}}}
	}
	l.recordDeleted(cache.DeletedFinalStateUnknown{Obj: rec("p")})
	l.recordDeleted(rec("gone"))
	if len(core.queued) != 1 || core.queued[0] != key {
		t.Errorf("queued %v, want %v alone", core.queued, key)
	}
}

// A save with nothing changed builds no record (Ledger.Save), so every
// change to what the record holds must reach it: each is written, and a
// record whose spec another client changed is written back.
func TestSaveAfterEachChange(t *testing.T) {
	l := New(newFakeCore(), fakeCache{}, nil, nil, slog.New(slog.DiscardHandler))
	applied, store := startRecordsIn(t, l)
	ctx := t.Context()
	cp := compiled(time.Time{}, time.Unix(1000, 0))
	var e Entry
	e.Admit("t1")
	e.Predate("t0")
	e.noteGenerated("t1 ConfigMap/default/a")
	if err := l.Save(ctx, key, cp, &e); err != nil {
		t.Fatal(err)
	}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	changes := []struct {
		name   string
		change func()
	}{
		{"rebuilding", func() { e.Rebuild(true) }},
		{"admitted", func() { e.Admit("t2") }},
		{"predating", func() { e.Predate("t3") }},
		{"written", func() { e.WritesTo(sets.New(secrets)) }},
		{"generated", func() { e.noteGenerated("t2 ConfigMap/default/b") }},
		{"generated forgotten", func() { e.forgetGenerated("t2 ConfigMap/default/b") }},
		{"applied", func() { e.SetApplied("rev-2", 3) }},
		{"derived", func() { e.SetDerivedBy(sproutv1alpha1.DerivedAdmissions{GenerateExisting: true}) }},
		{"admitted gone", func() { e.RetainAdmitted(func(uid types.UID) bool { return uid != "t2" }) }},
		{"admissions forgotten", func() { e.ForgetAdmissions() }},
	}
	for _, c := range changes {
		before := len(*applied)
		c.change()
		if err := l.Save(ctx, key, cp, &e); err != nil {
			t.Fatal(err)
		}
		if len(*applied) != before+1 {
			t.Errorf("%s changed: %d writes, want 1", c.name, len(*applied)-before)
		}
		if err := l.Save(ctx, key, cp, &e); err != nil || len(*applied) != before+1 {
			t.Errorf("%s changed, saved again unchanged: %v, %d writes, want 1", c.name, err, len(*applied)-before)
		}
	}
	// Another client empties the record's lists: its generation moves, and
	// the next save, with nothing changed here, writes it back.
	last := (*applied)[len(*applied)-1].DeepCopy()
	_ = unstructured.SetNestedStringSlice(last.Object, []string{}, "spec", "generated")
	last.SetGeneration(last.GetGeneration() + 1)
	_ = store.Update(last)
	before := len(*applied)
	if err := l.Save(ctx, key, cp, &e); err != nil {
		t.Fatal(err)
	}
	if len(*applied) != before+1 {
		t.Errorf("a record another client changed: %d writes, want 1", len(*applied)-before)
	}
}

// A new count of the applied revision's objects within a factor of two
// of the one last written costs no write of its own: the next write that
// something else asks for carries it. One that doubled is written.
func TestAppliedObjectsRideTheNextWrite(t *testing.T) {
	l := New(newFakeCore(), fakeCache{}, nil, nil, slog.New(slog.DiscardHandler))
	applied, _ := startRecordsIn(t, l)
	ctx := t.Context()
	cp := compiled(time.Time{}, time.Unix(1000, 0))
	var e Entry
	e.SetApplied("rev-1", 4)
	if err := l.Save(ctx, key, cp, &e); err != nil {
		t.Fatal(err)
	}
	before := len(*applied)
	e.SetApplied("rev-1", 5)
	if err := l.Save(ctx, key, cp, &e); err != nil || len(*applied) != before {
		t.Fatalf("a new count alone: %v, %d writes, want none", err, len(*applied)-before)
	}
	e.Admit("t1")
	if err := l.Save(ctx, key, cp, &e); err != nil || len(*applied) != before+1 {
		t.Fatalf("an admission: %v, %d writes, want 1", err, len(*applied)-before)
	}
	n, _, _ := unstructured.NestedInt64((*applied)[len(*applied)-1].Object, "spec", "appliedObjects")
	if n != 5 {
		t.Errorf("the record keeps %d applied objects, want 5", n)
	}
	var restored Entry
	l.Restore(key, string(cp.Policy.GetUID()), &restored)
	if rev, objects := restored.Applied(); rev != "rev-1" || objects != 5 {
		t.Errorf("restored %q with %d objects, want rev-1 with 5", rev, objects)
	}
	e.SetApplied("rev-1", 9) // more than twice the 4 last counted
	if err := l.Save(ctx, key, cp, &e); err != nil || len(*applied) != before+2 {
		t.Fatalf("a count doubled: %v, %d writes, want 2", err, len(*applied)-before)
	}
	if n, _, _ := unstructured.NestedInt64((*applied)[len(*applied)-1].Object, "spec", "appliedObjects"); n != 9 {
		t.Errorf("the record keeps %d applied objects, want 9", n)
	}
}

// BenchmarkSaveUnchanged is the save a sync makes before each part it
// applies, of a policy that admitted 10,000 triggers, when nothing changed.
func BenchmarkSaveUnchanged(b *testing.B) {
	l := New(newFakeCore(), fakeCache{}, nil, nil, slog.New(slog.DiscardHandler))
	startRecords(b, l)
	cp := compiled(time.Time{}, time.Unix(1000, 0))
	var e Entry
	for i := range 10000 {
		e.Admit(types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)))
	}
	if err := l.Save(b.Context(), key, cp, &e); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Save(b.Context(), key, cp, &e); err != nil {
			b.Fatal(err)
		}
	}
}
