package reconcile_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile"
)

// TestTriggerOfThePolicySecondIsPlacedByVersion: with generateExisting
// off, a trigger created just before its policy, in the same second, is
// an existing trigger and gets nothing, as in Kyverno, although the
// timestamps cannot tell the two apart; one created just after the
// policy gets its object. The order holds across a restart, and after a
// later write to the old trigger raised its version past the policy's.
func TestTriggerOfThePolicySecondIsPlacedByVersion(t *testing.T) {
	_, stopFirst := launchController(t, cfg, reconcile.DefaultOptions())
	stop := sync.OnceValue(stopFirst)
	t.Cleanup(func() { _ = stop() })
	tb := newTable(t, "same-second")
	// Only CREATE admits: the old trigger's later update must not.
	createOnly := func(doc string) string {
		return replaceOnce(t, doc, `operations: ["CREATE", "UPDATE"]`, `operations: ["CREATE"]`)
	}
	var name, old string
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			t.Fatal("five tries never created a trigger and a policy in one second")
		}
		name, old = fmt.Sprintf("same-second-%d", attempt), fmt.Sprintf("old-%d", attempt)
		tb.trigger(old, "same-second", "o1")
		tb.applyPolicy(createOnly(derivedPolicy(name, "same-second", "out", "one", true, false)))
		if policyCreated(t, name).Equal(tb.get(old).CreationTimestamp.Time) {
			break
		}
		tb.deletePolicy(name)
	}
	t.Cleanup(func() { tb.deletePolicy(name) })
	tb.trigger("new", "same-second", "n1")
	if !tb.get("new").CreationTimestamp.Time.Equal(policyCreated(t, name)) {
		t.Log("the new trigger fell in the next second: it shows only that a later trigger is admitted")
	}
	tb.waitFor("the new trigger's object", "new-out", exists)
	tb.settle("same-second", 1)
	if tb.get(old+"-out") != nil {
		t.Fatalf("%s, created before the policy in its second, got an object", old)
	}

	// The record keeps it as predating before anything else is done: a
	// stop before that record write would leave only its version to go by.
	oldUID := string(tb.get(old).UID)
	records := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories)
	poll(t, "the record to keep "+old+" as predating", func(ctx context.Context) (bool, error) {
		rec, err := records.Get(ctx, "gpol."+name, metav1.GetOptions{})
		if err != nil {
			return false, notFoundIsNil(err)
		}
		predating, _, _ := unstructured.NestedStringSlice(rec.Object, "spec", "predating")
		return slices.Contains(predating, oldUID), nil
	})

	tb.trigger(old, "same-second", "o2") // an UPDATE: its version is now above the policy's
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	startController(t)
	tb.settle("same-second", 2)
	if tb.get(old+"-out") != nil {
		t.Errorf("%s got an object after a restart", old)
	}
	if cm := tb.get("new-out"); cm == nil || !strings.Contains(cm.Data["from"], "n1") {
		t.Errorf("the new trigger's object after a restart: %v", cm)
	}
}
