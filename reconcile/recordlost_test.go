package reconcile_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/reconcile/ledger"
	"github.com/sprout-gitops/sprout/sources"
)

// TestRecordLostWhileStoppedPrunesNothing: the record of a policy from a
// folder is deleted while Sprout is stopped. Sprout must not forget which
// triggers the policy generated for, nor when it began: its objects tell,
// and nothing whose trigger still matches is pruned, not even when the
// policy next writes. The record is rebuilt, its beginning included.
func TestRecordLostWhileStoppedPrunesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(derivedPolicy("lost-record", "lostrec", "out", "one", true, false)), 0o644); err != nil {
		t.Fatal(err)
	}
	fromDir := func(o *reconcile.Options) {
		o.Sources = []sources.Source{sources.NewDirectory(dir, 100*time.Millisecond)}
	}
	const policy = "GeneratingPolicy/lost-record"
	records := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories)
	activated := func() time.Time {
		t.Helper()
		rec, err := records.Get(context.Background(), "gpol.lost-record", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the record: %v", err)
		}
		s, _, _ := unstructured.NestedString(rec.Object, "spec", "activated")
		at, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatalf("spec.activated %q: %v", s, err)
		}
		return at
	}

	runUntilSyncedWith(t, cfg, fromDir, policy) // the policy begins
	began := activated()
	tb := newTable(t, "lostrec")
	for _, name := range []string{"a", "b", "c"} {
		tb.trigger(name, "lostrec", name+"1")
	}
	runUntilSyncedWith(t, cfg, fromDir, policy)
	for _, name := range []string{"a-out", "b-out", "c-out"} {
		if tb.get(name) == nil {
			t.Fatalf("%s was not generated", name)
		}
	}
	if err := records.Delete(context.Background(), "gpol.lost-record", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Creation times are whole seconds: Sprout starts again in a later
	// second than the triggers', as a restart does.
	last := tb.get("c").CreationTimestamp.Time
	poll(t, "a second after the triggers", func(context.Context) (bool, error) {
		return time.Now().Truncate(time.Second).After(last), nil
	})

	restartRebuilding(t, fromDir, "lost-record")
	tb.trigger("d", "lostrec", "d1") // the policy's next write
	tb.waitFor("the downstream of a new trigger", "d-out", exists)
	tb.settle("lostrec", 1)
	for _, name := range []string{"a-out", "b-out", "c-out"} {
		if tb.get(name) == nil {
			t.Errorf("%s was pruned after the record was lost, its trigger still matching", name)
		}
	}
	poll(t, "the record rebuilt", func(ctx context.Context) (bool, error) {
		rec, err := records.Get(ctx, "gpol.lost-record", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && rec.GetLabels()[ledger.LabelRebuilding] == "", err
	})
	a := tb.get("a")
	if at := activated(); at.Before(began) || at.After(a.CreationTimestamp.Time) {
		t.Errorf("rebuilt beginning %v, want between the policy's first %v and its first trigger's creation %v", at, began, a.CreationTimestamp.Time)
	}

	// Rebuilt, the policy prunes again what it no longer wants.
	tb.delete("b")
	tb.waitFor("the downstream of a deleted trigger to be pruned", "b-out", absent)
	if tb.get("a-out") == nil {
		t.Error("a-out was pruned with b-out")
	}
}

// TestRecordDeletedWhileRunningIsWrittenAgain: a record deleted while
// Sprout runs is written again by the sync its deletion queues, not at the
// next resync.
func TestRecordDeletedWhileRunningIsWrittenAgain(t *testing.T) {
	var syncs atomic.Int64
	runController(t, func(o *reconcile.Options) {
		o.ResyncSchedule = ""
		o.OnSync = func(p string, err error) {
			if p == "GeneratingPolicy/record-deleted" && err == nil {
				syncs.Add(1)
			}
		}
	})
	tb := newTable(t, "recdel")
	// No trigger: after its first sync, nothing but the record's deletion
	// queues the policy.
	tb.applyPolicy(derivedPolicy("record-deleted", "recdel", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("record-deleted") })
	poll(t, "the policy's first sync", func(context.Context) (bool, error) { return syncs.Load() >= 1, nil })
	records := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories)
	var before *unstructured.Unstructured
	poll(t, "the record", func(ctx context.Context) (bool, error) {
		var err error
		before, err = records.Get(ctx, "gpol.record-deleted", metav1.GetOptions{})
		return err == nil, nil
	})
	if err := records.Delete(context.Background(), before.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the record written again", func(ctx context.Context) (bool, error) {
		rec, err := records.Get(ctx, before.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil || rec.GetUID() == before.GetUID() {
			return false, err
		}
		was, _, _ := unstructured.NestedFieldNoCopy(before.Object, "spec")
		is, _, _ := unstructured.NestedFieldNoCopy(rec.Object, "spec")
		if !equality.Semantic.DeepEqual(was, is) {
			t.Errorf("record written again with spec %v, want %v", is, was)
		}
		return true, nil
	})
	tb.trigger("a", "recdel", "a1")
	tb.waitFor("the policy to go on generating", "a-out", exists)
}
