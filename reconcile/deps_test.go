package reconcile_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/fixtures"
)

// TestDepsSourceChangeEvaluatesOnlyItsReaders: of a clone policy (resource.Get)
// and a lookup policy (resource.List with a selector), trigger t0 reads
// source c-0 and four others read c-1. A change of c-0 is synced
// incrementally and evaluates t0 alone; a relabelling of c-1 that moves it
// from the others' List to t0's evaluates the triggers whose List it left
// as well as the one it joined. After each, a full sync of both policies
// writes nothing: the incremental result is the full recompute's.
func TestDepsSourceChangeEvaluatesOnlyItsReaders(t *testing.T) {
	ctx := context.Background()
	tb := newTable(t, "deps")
	createNamespace(t, "deps-src", nil)
	source := func(name, pick, v string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "deps-src", Labels: map[string]string{"pick": pick}},
			Data: map[string]string{"v": v}}
		if _, err := tb.kube.CoreV1().ConfigMaps("deps-src").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	source("c-0", "0", "a")
	source("c-1", "1", "b")
	readers := []string{"t1", "t2", "t3", "t4"}
	for i, name := range append([]string{"t0"}, readers...) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "deps", Labels: map[string]string{"app": "deps", "src": fmt.Sprint(min(i, 1))}}}
		if _, err := tb.kube.CoreV1().ConfigMaps("deps").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	h := startRecompute(t, "deps", []string{"deps", "deps-src"}, "deps-clone", "deps-pick")
	tb.applyPolicy(fixtures.MustPolicyFile("clone-own-source", fixtures.Params{Name: "deps-clone", App: "deps", Source: "deps-src", Suffix: "c"}))
	tb.applyPolicy(fixtures.MustPolicyFile("lookup-own-sources", fixtures.Params{Name: "deps-pick", App: "deps", Source: "deps-src", Suffix: "p"}))
	t.Cleanup(func() {
		tb.deletePolicy("deps-clone")
		tb.deletePolicy("deps-pick")
	})
	policies := []string{"GeneratingPolicy/deps-clone", "GeneratingPolicy/deps-pick"}
	metric := func(policy, name, label, value string) float64 {
		return max(metricValue(t, h.reg, name, map[string]string{"policy": policy, label: value}), 0)
	}
	holds := func(key, want string) func(*corev1.ConfigMap) bool {
		return func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data[key] == want }
	}
	tb.waitFor("t0's clone", "t0-c", holds("v", "a"))
	tb.waitFor("t0's lookup", "t0-p", holds("picked", "c-0=a"))
	for _, name := range readers {
		tb.waitFor(name+"'s clone", name+"-c", holds("v", "b"))
		tb.waitFor(name+"'s lookup", name+"-p", holds("picked", "c-1=b"))
	}

	// sinceNow returns, per policy, the full syncs and the evaluations
	// since it was called.
	sinceNow := func() func() (fulls, evaluated [2]float64) {
		var f0, e0 [2]float64
		for i, p := range policies {
			f0[i], e0[i] = metric(p, "sprout_syncs_total", "mode", "full"), metric(p, "sprout_evaluations_total", "result", "evaluated")
		}
		return func() (fulls, evaluated [2]float64) {
			for i, p := range policies {
				fulls[i] = metric(p, "sprout_syncs_total", "mode", "full") - f0[i]
				evaluated[i] = metric(p, "sprout_evaluations_total", "result", "evaluated") - e0[i]
			}
			return fulls, evaluated
		}
	}
	patchSource := func(name, patch string) {
		t.Helper()
		if _, err := tb.kube.CoreV1().ConfigMaps("deps-src").Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A full sync first: it takes the triggers whose new objects' arrival
	// in the cache marked them for a look a second later, and the look
	// then finds nothing to evaluate.
	h.fullSyncWritesNothing("after the first syncs")

	// t0 alone reads c-0. Its evaluation is counted once, and once more
	// when the update written for it comes back (twice if the event's
	// two requeues, of the object before and after, straddle a sync's
	// start): an evaluation that read another object is not kept. A full
	// sync would evaluate the four others too.
	since := sinceNow()
	patchSource("c-0", `{"data":{"v":"a2"}}`)
	tb.waitFor("t0's clone updated", "t0-c", holds("v", "a2"))
	tb.waitFor("t0's lookup updated", "t0-p", holds("picked", "c-0=a2"))
	h.settle()
	fulls, evaluated := since()
	for i, p := range policies {
		if fulls[i] != 0 || evaluated[i] < 1 || evaluated[i] > 3 {
			t.Errorf("%s: a change of the source one trigger reads made %v full syncs and %v evaluations, want none and t0's (1 to 3)", p, fulls[i], evaluated[i])
		}
	}
	h.fullSyncWritesNothing("after a change of c-0")

	// c-1 leaves the List of t1..t4 (its labels before) and joins t0's
	// (its labels after); the clones of t1..t4 copy its labels.
	since = sinceNow()
	patchSource("c-1", `{"metadata":{"labels":{"pick":"0"}}}`)
	tb.waitFor("t0's lookup gains c-1", "t0-p", holds("picked", "c-0=a2,c-1=b"))
	for _, name := range readers {
		tb.waitFor(name+"'s lookup loses c-1", name+"-p", holds("picked", ""))
		tb.waitFor(name+"'s clone relabelled", name+"-c", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Labels["pick"] == "0" })
	}
	h.settle()
	if fulls, _ := since(); fulls != [2]float64{} {
		t.Errorf("a relabelled source made full syncs %v, want none", fulls)
	}
	h.fullSyncWritesNothing("after c-1 moved to t0's List")
}
