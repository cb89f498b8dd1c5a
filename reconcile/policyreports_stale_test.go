package reconcile_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/reconcile"
)

// stalePolicy generates "<trigger>-<name>" for the ConfigMaps whose labels
// hold every one of selector set to "yes"; labels are the policy's own.
// stalePolicy generates for existing triggers too: the test creates its
// triggers first, and whether they fall in the policy's first second must
// not decide what it sees.
func stalePolicy(name string, labels map[string]string, selector ...string) string {
	return fixtures.MustPolicyFile("selected", fixtures.Params{Name: name, Labels: labels, Selector: selector})
}

// reportedPolicies are the policies report u holds a result of, sorted.
func reportedPolicies(u *unstructured.Unstructured) []string {
	results, _, _ := unstructured.NestedSlice(u.Object, "results")
	var out []string
	for _, r := range results {
		p, _ := r.(map[string]any)["policy"].(string)
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// waitReported waits until the report of the trigger uid holds results of
// exactly policies; none waits until it has no report.
func waitReported(t *testing.T, ns string, uid types.UID, policies ...string) {
	t.Helper()
	if len(policies) == 0 {
		waitNoReport(t, ns, uid)
		return
	}
	waitReport(t, ns, uid, func(u *unstructured.Unstructured) bool { return slices.Equal(reportedPolicies(u), policies) })
}

// TestStaleResultsLeaveReports: a report holds results only for the
// policies that match its trigger now, as Kyverno's do, and goes when none
// is left: a trigger relabelled out of a policy's objectSelector loses
// that policy's result in the incremental sync its event makes; a policy
// whose match narrows loses its results for the triggers it no longer
// matches in its full sync, also after a restart, for results written
// before it; a policy whose reports are turned off (Kyverno's label
// reports.kyverno.io/disabled) loses all of them, and gets them back when
// they are turned on again.
func TestStaleResultsLeaveReports(t *testing.T) {
	installReportCRDs(t)
	reg := prometheus.NewRegistry()
	opts := reconcile.DefaultOptions()
	opts.Logger, opts.Metrics = slog.New(slog.DiscardHandler), reg
	_, stop := launchController(t, cfg, opts)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = stop()
		}
	})
	tb := newTable(t, "reported-stale")
	for name, labels := range map[string][]string{"flip": {"a", "b"}, "narrow": {"a"}, "kept": {"a", "b", "keep"}} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tb.ns, Labels: map[string]string{}}}
		for _, l := range labels {
			cm.Labels[l] = "yes"
		}
		if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tb.applyPolicy(stalePolicy("stale-a", nil, "a"))
	tb.applyPolicy(stalePolicy("stale-b", nil, "b"))
	t.Cleanup(func() { tb.deletePolicy("stale-a"); tb.deletePolicy("stale-b") })
	flip, narrow, kept := tb.get("flip").UID, tb.get("narrow").UID, tb.get("kept").UID
	waitReported(t, tb.ns, flip, "stale-a", "stale-b")
	waitReported(t, tb.ns, narrow, "stale-a")
	waitReported(t, tb.ns, kept, "stale-a", "stale-b")

	// Relabelled out of stale-a's selector: its event syncs stale-a
	// incrementally, and stale-b's result stays.
	incremental := func() float64 {
		return max(metricValue(t, reg, "sprout_syncs_total", map[string]string{"policy": "GeneratingPolicy/stale-a", "mode": "incremental"}), 0)
	}
	before := incremental()
	if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Patch(context.Background(), "flip", types.MergePatchType,
		[]byte(`{"metadata": {"labels": {"a": null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReported(t, tb.ns, flip, "stale-b")
	if after := incremental(); after <= before {
		t.Errorf("stale-a synced the relabelled trigger with no incremental sync (%v, then %v): the test meant that path", before, after)
	}

	// stale-a narrowed: narrow's report goes, kept's keeps both results.
	tb.applyPolicy(stalePolicy("stale-a", nil, "a", "keep"))
	waitReported(t, tb.ns, narrow)
	waitReported(t, tb.ns, kept, "stale-a", "stale-b")

	// Narrowed again while Sprout is down: the restarted controller reads
	// the reports it wrote and drops the result it finds stale.
	stopped = true
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	tb.applyPolicy(stalePolicy("stale-a", nil, "a", "keep", "never"))
	runController(t, nil)
	waitReported(t, tb.ns, kept, "stale-b")

	// stale-b's reports turned off: its results go, and the reports with them.
	tb.applyPolicy(stalePolicy("stale-b", map[string]string{"reports.kyverno.io/disabled": "true"}, "b"))
	waitReported(t, tb.ns, flip)
	waitReported(t, tb.ns, kept)
	// Turned on again, a label being no new generation: every trigger is
	// evaluated anew and reported, though its evaluation's inputs did not
	// change.
	tb.applyPolicy(stalePolicy("stale-b", nil, "b"))
	waitReported(t, tb.ns, flip, "stale-b")
	waitReported(t, tb.ns, kept, "stale-b")
}
