package reconcile_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile"
)

// startChain creates the ConfigMap labelled chain: from that starts a
// chain of chainPolicy policies.
func startChain(t *testing.T, tb *table, from string) {
	t.Helper()
	start := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "start", Namespace: tb.ns, Labels: map[string]string{"chain": from}}}
	if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(context.Background(), start, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestCycleOfPoliciesStops: ping and pong both opt in to triggering on
// what policies generated (skipBackgroundRequests false), and each
// generates the other's trigger. The chain comes back to ping after one
// round and stops there, with a ChainBounded Warning Event on ping naming
// the chain. Before, the two generated objects for ever.
func TestCycleOfPoliciesStops(t *testing.T) {
	_, c := runController(t, nil)
	tb := newTable(t, "cycle")
	tb.applyPolicy(chainPolicy("cycle-ping", "ping", "pong", "p", false))
	tb.applyPolicy(chainPolicy("cycle-pong", "pong", "ping", "q", false))
	t.Cleanup(func() { tb.deletePolicy("cycle-ping"); tb.deletePolicy("cycle-pong") })
	startChain(t, tb, "ping")
	tb.waitFor("pong's object from ping's", "start-p-q", exists)
	poll(t, "the chain reported on ping", func(ctx context.Context) (bool, error) {
		return eventCount(eventsOn(ctx, t, "default", "GeneratingPolicy", "cycle-ping"), reconcile.ReasonChainBounded) > 0 && c.SyncsIdle(), nil
	})
	if cm := tb.get("start-p-q-p"); cm != nil {
		t.Fatal("ping triggered on what pong generated from ping's object")
	}
	list, err := tb.kube.CoreV1().ConfigMaps(tb.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "chain"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Errorf("%d ConfigMaps in the chain, want 3 (start, start-p, start-p-q)", len(list.Items))
	}
	events := eventsOn(context.Background(), t, "default", "GeneratingPolicy", "cycle-ping")
	for _, e := range events {
		if e.Reason == reconcile.ReasonChainBounded && !strings.Contains(e.Message, "GeneratingPolicy/cycle-ping → GeneratingPolicy/cycle-pong") {
			t.Errorf("event %q does not name the chain", e.Message)
		}
	}
}

// TestLinearChainGeneratesUpToTheBound: three policies in a line, each
// triggering on what the one before generated, all generate under a bound
// of three, and each object names the policies before its own; a fourth
// in the line is past the bound, and is told so.
func TestLinearChainGeneratesUpToTheBound(t *testing.T) {
	_, c := runController(t, func(o *reconcile.Options) { o.MaxChain = 3 })
	tb := newTable(t, "linear")
	for _, p := range []struct{ name, from, to, suffix string }{
		{"linear-a", "a", "b", "a"}, {"linear-b", "b", "c", "b"}, {"linear-c", "c", "d", "c"}, {"linear-d", "d", "e", "d"},
	} {
		tb.applyPolicy(chainPolicy(p.name, p.from, p.to, p.suffix, false))
		t.Cleanup(func() { tb.deletePolicy(p.name) })
	}
	startChain(t, tb, "a")
	last := tb.waitFor("the third policy's object", "start-a-b-c", exists)
	if got, want := last.Annotations[sproutv1alpha1.AnnotationChain], "GeneratingPolicy/linear-a,GeneratingPolicy/linear-b"; got != want {
		t.Errorf("the third object's chain %q, want %q", got, want)
	}
	if first := tb.get("start-a"); first.Annotations[sproutv1alpha1.AnnotationChain] != "" {
		t.Errorf("the first object, from an object no policy generated, has a chain %q", first.Annotations[sproutv1alpha1.AnnotationChain])
	}
	poll(t, "the bound reported on the fourth", func(ctx context.Context) (bool, error) {
		return eventCount(eventsOn(ctx, t, "default", "GeneratingPolicy", "linear-d"), reconcile.ReasonChainBounded) > 0 && c.SyncsIdle(), nil
	})
	if tb.get("start-a-b-c-d") != nil {
		t.Error("the fourth policy generated past the bound of three")
	}
}
