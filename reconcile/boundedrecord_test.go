package reconcile_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// recordGenerated returns the generated entries of a cluster policy's
// record, its shards included.
func recordGenerated(ctx context.Context, policy string) ([]string, error) {
	records := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories)
	main, err := records.Get(ctx, "gpol."+policy, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	generated, _, _ := unstructured.NestedStringSlice(main.Object, "spec", "generated")
	shards, _, _ := unstructured.NestedInt64(main.Object, "spec", "shards")
	for i := range shards {
		shard, err := records.Get(ctx, fmt.Sprintf("gpol.%s.%d-%d", policy, shards, i), metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		more, _, _ := unstructured.NestedStringSlice(shard.Object, "spec", "generated")
		generated = append(generated, more...)
	}
	return generated, nil
}

// TestRecordForgetsGoneTriggers: a policy that does not synchronize
// remembers what it generated only for triggers that exist, so its record
// is bounded by the live triggers, not by history: the entries of deleted
// triggers go, whether they were deleted while Sprout was stopped or
// running.
func TestRecordForgetsGoneTriggers(t *testing.T) {
	ctx := context.Background()
	tb := newTable(t, "bounded")
	tb.applyPolicy(derivedPolicy("bounded", "bounded", "copy", "one", false, false))
	t.Cleanup(func() { tb.deletePolicy("bounded") })
	names := []string{"a", "b", "c", "d", "e"}
	for _, name := range names {
		tb.trigger(name, "bounded", name)
	}
	runUntilSynced(t, cfg, "GeneratingPolicy/bounded")
	if got, err := recordGenerated(ctx, "bounded"); err != nil || len(got) != len(names) {
		t.Fatalf("record holds %v (%v), want an entry for each of %v", got, err, names)
	}

	// Deleted while Sprout is stopped: the next start forgets them.
	for _, name := range names[:3] {
		tb.delete(name)
	}
	runUntilSynced(t, cfg, "GeneratingPolicy/bounded")
	if got, err := recordGenerated(ctx, "bounded"); err != nil || len(got) != 2 {
		t.Errorf("after a restart the record holds %v (%v), want the entries of d and e alone", got, err)
	}
	for _, name := range names {
		if tb.get(name+"-copy") == nil {
			t.Errorf("%s-copy, generated once, was deleted", name)
		}
	}

	// Deleted while Sprout runs.
	startController(t)
	tb.delete("d")
	poll(t, "the record to forget trigger d", func(ctx context.Context) (bool, error) {
		got, err := recordGenerated(ctx, "bounded")
		return err == nil && len(got) == 1, nil
	})
	// The live trigger's entry still holds: its deleted downstream stays
	// deleted.
	tb.delete("e-copy")
	tb.trigger("e", "bounded", "changed")
	tb.trigger("f", "bounded", "f")
	tb.waitFor("a later trigger's downstream", "f-copy", exists)
	if tb.get("e-copy") != nil {
		t.Error("the downstream of a live trigger, generated once, came back")
	}
}
