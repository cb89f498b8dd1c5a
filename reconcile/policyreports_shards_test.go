package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/policyreport"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/sources"
)

// conflictCounter counts the API server's 409 answers: a write at a stale
// resourceVersion, or a create of a report that exists.
type conflictCounter struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c conflictCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusConflict {
		c.n.Add(1)
	}
	return resp, err
}

// startWriter runs a report Writer, as one shard's controller does, until
// the test ends; conflicts counts the 409s it meets.
func startWriter(t *testing.T, conflicts *atomic.Int64) *policyreport.Writer {
	t.Helper()
	config := rest.CopyConfig(cfg)
	config.QPS, config.RateLimiter = -1, nil
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper { return conflictCounter{rt: rt, n: conflicts} })
	w, err := policyreport.NewWriter(config, policyreport.Options{QPS: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return w
}

// Two shards whose policies share triggers share their reports: each
// writer writes only its policies' results, over the report as the API
// server holds it, at the resourceVersion it last saw; a create of a
// report the other made, or an update at a version the other replaced,
// fails, and the writer reads the report again and writes over what it
// now holds. Neither loses the other's results, whatever order their
// writes come in, and a report goes only when neither has a result left.
func TestShardsKeepEachOthersResults(t *testing.T) {
	installReportCRDs(t)
	tb := newTable(t, "reported-shards")
	const n = 12
	triggers := make([]policyreport.Trigger, 0, n)
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%d", i), Namespace: tb.ns}}
		got, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(context.Background(), cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		triggers = append(triggers, policyreport.Trigger{APIVersion: "v1", Kind: "ConfigMap", Namespace: tb.ns, Name: got.Name, UID: got.UID})
	}
	policy := func(name string) *metav1.ObjectMeta { return &metav1.ObjectMeta{Name: name} }
	pass := func(name string) *policyreport.Result { return policyreport.Pass(policy(name), nil, nil) }
	waitAll := func(what func(i int) []string) {
		t.Helper()
		for i, tr := range triggers {
			waitReported(t, tb.ns, tr.UID, what(i)...)
		}
	}
	var conflicts atomic.Int64
	// Both load before either writes: each knows of no report.
	one, two := startWriter(t, &conflicts), startWriter(t, &conflicts)

	for _, tr := range triggers {
		one.Set(tr, "one", pass("one"))
	}
	waitAll(func(int) []string { return []string{"one"} })
	// two creates what exists, then reads it.
	for _, tr := range triggers {
		two.Set(tr, "two", pass("two"))
	}
	waitAll(func(int) []string { return []string{"one", "two"} })
	// one updates at the version it wrote, which two replaced.
	for _, tr := range triggers {
		one.Set(tr, "one", policyreport.Error(policy("one"), fmt.Errorf("broken")))
	}
	for _, tr := range triggers {
		waitReport(t, tb.ns, tr.UID, func(u *unstructured.Unstructured) bool {
			return resultFor(u, "one")["result"] == "error" && resultFor(u, "two")["result"] == "pass"
		})
	}
	if got := conflicts.Load(); got < 2*n {
		t.Errorf("%d conflicts, want at least %d: two's creates and one's updates each meet one", got, 2*n)
	}

	// At once: two drops its result from the first half, one drops its
	// policy everywhere.
	firstHalf := func(uid types.UID) bool {
		for _, tr := range triggers[:n/2] {
			if tr.UID == uid {
				return true
			}
		}
		return false
	}
	var wg sync.WaitGroup
	wg.Go(func() { two.Retain("two", func(uid types.UID) bool { return !firstHalf(uid) }) })
	wg.Go(func() { one.DropPolicy("one") })
	wg.Wait()
	waitAll(func(i int) []string {
		if i < n/2 {
			return nil
		}
		return []string{"two"}
	})
}

// resultFor is policy's result in report u, nil when it has none.
func resultFor(u *unstructured.Unstructured, policy string) map[string]any {
	results, _, _ := unstructured.NestedSlice(u.Object, "results")
	for _, r := range results {
		if m, _ := r.(map[string]any); m["policy"] == policy {
			return m
		}
	}
	return nil
}

// Two controllers, each selecting its shard's policies, run policies that
// match the same triggers: each trigger's one report holds both policies'
// results, and a policy that stops matching leaves the other's in place.
func TestTwoShardsShareReports(t *testing.T) {
	installReportCRDs(t)
	for _, shard := range []string{"one", "two"} {
		runController(t, func(o *reconcile.Options) {
			src := sources.NewCluster(dynamic.NewForConfigOrDie(cfg))
			src.SelectPolicies(labels.SelectorFromSet(labels.Set{"shard": shard}))
			o.Sources, o.Shard = []sources.Source{src}, shard
		})
	}
	tb := newTable(t, "reported-two-shards")
	for _, name := range []string{"x", "y", "z"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tb.ns, Labels: map[string]string{"a": "yes", "keep": "yes"}}}
		if name == "z" {
			delete(cm.Labels, "keep")
		}
		if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	one, two := map[string]string{"shard": "one"}, map[string]string{"shard": "two"}
	tb.applyPolicy(stalePolicy("shard-one", one, "a"))
	tb.applyPolicy(stalePolicy("shard-two", two, "a"))
	t.Cleanup(func() { tb.deletePolicy("shard-one"); tb.deletePolicy("shard-two") })
	x, y, z := tb.get("x").UID, tb.get("y").UID, tb.get("z").UID
	for _, uid := range []types.UID{x, y, z} {
		waitReported(t, tb.ns, uid, "shard-one", "shard-two")
	}
	tb.applyPolicy(stalePolicy("shard-one", one, "a", "keep"))
	waitReported(t, tb.ns, z, "shard-two")
	for _, uid := range []types.UID{x, y} {
		waitReported(t, tb.ns, uid, "shard-one", "shard-two")
	}
}
