package reconcile_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/fixtures"
)

// TestStatusWrittenBackOverALaggingCache: a status whose counts changed,
// then changed back before the policy's cache saw the change (two syncs in
// quick succession, the second compared with the copy the first had), is
// written back: the policy does not keep showing the change.
func TestStatusWrittenBackOverALaggingCache(t *testing.T) {
	onlySproutCRDs(t, "status.triggers and status.objects, which it compares")
	ctx := context.Background()
	tb := newTable(t, "lagged")
	h := startRecompute(t, "lagged", []string{"lagged"}, "lagged-status")
	tb.applyPolicy(fixtures.MustPolicyFile("conditional-derived", fixtures.Params{Name: "lagged-status", App: "lagged", Suffix: "d", Value: "v"}))
	t.Cleanup(func() { tb.deletePolicy("lagged-status") })
	h.settleWhen(func() bool { return h.syncs("lagged-status", "full") > 0 })
	counts := func() (triggers, objects int64) {
		t.Helper()
		u, err := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies).Get(ctx, "lagged-status", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		triggers, _, _ = unstructured.NestedInt64(u.Object, "status", "triggers")
		objects, _, _ = unstructured.NestedInt64(u.Object, "status", "objects")
		return triggers, objects
	}
	if triggers, objects := counts(); triggers != 0 || objects != 0 {
		t.Fatalf("a policy without triggers counts %d triggers and %d objects", triggers, objects)
	}

	report := h.c.StaleReporter("lagged-status")
	if err := report(ctx, 2, 3); err != nil {
		t.Fatal(err)
	}
	if triggers, objects := counts(); triggers != 2 || objects != 3 {
		t.Fatalf("reported 2 triggers and 3 objects, the status counts %d and %d", triggers, objects)
	}
	if err := report(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if triggers, objects := counts(); triggers != 0 || objects != 0 {
		t.Errorf("counts changed back before the cache saw the change: the status counts %d triggers and %d objects, want 0 and 0", triggers, objects)
	}
}

// A status reported from a copy of the policy older than the controller's
// newest (a sync, or a report queued for later, keeps the copy it began
// with) is compared with the newest status Sprout knows: reporting what
// the server already holds writes nothing. Compared with the old copy,
// it was written again (the incremental equivalence test saw such a
// PATCH once in about a dozen long runs).
func TestStatusFromAnOldCopyComparedWithTheNewest(t *testing.T) {
	ctx := context.Background()
	tb := newTable(t, "lagged-copy")
	h := startRecompute(t, "lagged-copy", []string{"lagged-copy"}, "lagged-copy-status")
	tb.applyPolicy(fixtures.MustPolicyFile("conditional-derived", fixtures.Params{Name: "lagged-copy-status", App: "lagged-copy", Suffix: "d", Value: "v"}))
	t.Cleanup(func() { tb.deletePolicy("lagged-copy-status") })
	h.settleWhen(func() bool { return h.syncs("lagged-copy-status", "full") > 0 })

	old := h.c.StaleReporter("lagged-copy-status")
	if err := old(ctx, 2, 3); err != nil {
		t.Fatal(err)
	}
	h.settle() // the controller's copy of the policy holds the write
	if err := h.c.StaleReporter("lagged-copy-status")(ctx, 2, 3); err != nil {
		t.Fatal(err)
	}
	from := h.log.len()
	if err := old(ctx, 2, 3); err != nil {
		t.Fatal(err)
	}
	if w := h.log.since(from); len(w) != 0 {
		t.Errorf("reporting the status the server holds, from an old copy of the policy, wrote %d times: %v", len(w), w)
	}
}
