package reconcile_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/sources"
)

// getSource reads a source's PolicySource, or nil.
func getSource(ctx context.Context, t *testing.T, source string) *sproutv1alpha1.PolicySource {
	t.Helper()
	u, err := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicySources).Get(ctx, sources.ObjectName(source), metav1.GetOptions{})
	if err != nil {
		return nil
	}
	ps := &sproutv1alpha1.PolicySource{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ps); err != nil {
		t.Fatal(err)
	}
	return ps
}

// waitForSource polls until the source's PolicySource satisfies cond.
func waitForSource(t *testing.T, what, source string, cond func(*sproutv1alpha1.PolicySource, *metav1.Condition) bool) *sproutv1alpha1.PolicySource {
	t.Helper()
	var ps *sproutv1alpha1.PolicySource
	poll(t, what, func(ctx context.Context) (bool, error) {
		ps = getSource(ctx, t, source)
		return ps != nil && cond(ps, meta.FindStatusCondition(ps.Status.Conditions, reconcile.ConditionReady)), nil
	})
	return ps
}

// sourceEvents lists the Events on a source's PolicySource.
func sourceEvents(ctx context.Context, t *testing.T, source string) []corev1.Event {
	t.Helper()
	list, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Events("default").List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": sproutv1alpha1.PolicySourceKind, "involvedObject.name": sources.ObjectName(source)}.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func hasEvent(events []corev1.Event, reason string, contains ...string) bool {
	for _, e := range events {
		if e.Reason != reason {
			continue
		}
		ok := true
		for _, c := range contains {
			ok = ok && strings.Contains(e.Message, c)
		}
		if ok {
			return true
		}
	}
	return false
}

// findMetric returns one series of a registry, or nil.
func findMetric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matchLabels(m, labels) {
				return m
			}
		}
	}
	return nil
}

// metricValue reads one counter or gauge; -1 when it is absent.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	m := findMetric(t, reg, name, labels)
	switch {
	case m == nil:
		return -1
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

func matchLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// TestSourceStatus: a folder source's PolicySource, Events and metrics say
// which revision runs and why a later one was rejected, and recover with a
// fixed revision.
func TestSourceStatus(t *testing.T) {
	dir, staging := t.TempDir(), t.TempDir()
	// Written whole, by a rename: a poll between os.WriteFile's create and
	// its write read an empty c.yaml once, a good revision of two
	// policies, which then ran in the place of the first.
	write := func(name, content string) {
		t.Helper()
		tmp := filepath.Join(staging, name)
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", derivedPolicy("status-a", "srcstatus", "out", "one", true, false))
	write("b.yaml", derivedPolicy("status-b", "srcstatus", "out2", "one", true, false))
	src := sources.NewDirectory(dir, 100*time.Millisecond)
	name := src.Name()
	reg := prometheus.NewRegistry()
	runController(t, func(o *reconcile.Options) {
		o.Sources = []sources.Source{src}
		o.Metrics = reg
	})

	first := waitForSource(t, "the source's first revision", name, func(ps *sproutv1alpha1.PolicySource, ready *metav1.Condition) bool {
		return ps.Status.Policies == 2 && ready != nil && ready.Status == metav1.ConditionTrue
	})
	if first.Spec.Type != "directory" || first.Spec.URL != dir || !strings.HasPrefix(first.Status.Revision, "sha256:") {
		t.Errorf("PolicySource = %+v", first)
	}
	poll(t, "the RevisionTaken event", func(ctx context.Context) (bool, error) {
		return hasEvent(sourceEvents(ctx, t, name), reconcile.ReasonRevisionTaken, first.Status.Revision, "2 policies"), nil
	})
	if v := metricValue(t, reg, "sprout_source_revision_info", map[string]string{"source": name, "revision": first.Status.Revision}); v != 1 {
		t.Errorf("sprout_source_revision_info = %v", v)
	}
	if v := metricValue(t, reg, "sprout_source_checks_total", map[string]string{"source": name, "result": "taken"}); v < 1 {
		t.Errorf("taken checks = %v", v)
	}

	write("c.yaml", strings.Replace(derivedPolicy("status-c", "srcstatus", "x", "one", true, false), "generator.Apply(", "generator.Apply((", 1))
	rejected := waitForSource(t, "the rejection on the source", name, func(_ *sproutv1alpha1.PolicySource, ready *metav1.Condition) bool {
		return ready != nil && ready.Status == metav1.ConditionFalse
	})
	ready := meta.FindStatusCondition(rejected.Status.Conditions, reconcile.ConditionReady)
	if ready.Reason != reconcile.ReasonRevisionRejected || !strings.Contains(ready.Message, "c.yaml") || !strings.Contains(ready.Message, "spec.generate[0].expression") {
		t.Errorf("Ready = %s: %s", ready.Reason, ready.Message)
	}
	if rejected.Status.Revision != first.Status.Revision || rejected.Status.Policies != 2 {
		t.Errorf("the last good revision must keep running: %q, %d policies", rejected.Status.Revision, rejected.Status.Policies)
	}
	poll(t, "the RevisionRejected event", func(ctx context.Context) (bool, error) {
		return hasEvent(sourceEvents(ctx, t, name), reconcile.ReasonRevisionRejected, "c.yaml", "spec.generate[0].expression"), nil
	})
	poll(t, "the failure in the metrics", func(context.Context) (bool, error) {
		return metricValue(t, reg, "sprout_source_ready", map[string]string{"source": name}) == 0 &&
			metricValue(t, reg, "sprout_source_checks_total", map[string]string{"source": name, "result": "failed"}) >= 1, nil
	})
	// A rejection repeated at every poll is one Event, not one per poll.
	ctx := context.Background()
	n := 0
	for _, e := range sourceEvents(ctx, t, name) {
		if e.Reason == reconcile.ReasonRevisionRejected {
			n += int(e.Count)
		}
	}
	if n != 1 {
		t.Errorf("%d RevisionRejected events for one rejection", n)
	}

	write("c.yaml", derivedPolicy("status-c", "srcstatus", "x", "one", true, false))
	fixed := waitForSource(t, "the fixed revision", name, func(ps *sproutv1alpha1.PolicySource, ready *metav1.Condition) bool {
		return ready != nil && ready.Status == metav1.ConditionTrue && ps.Status.Policies == 3
	})
	if fixed.Status.Revision == first.Status.Revision {
		t.Error("the fixed revision was not taken")
	}
	poll(t, "the metrics of the fixed revision", func(context.Context) (bool, error) {
		return metricValue(t, reg, "sprout_source_ready", map[string]string{"source": name}) == 1 &&
			metricValue(t, reg, "sprout_source_revision_info", map[string]string{"source": name, "revision": fixed.Status.Revision}) == 1 &&
			metricValue(t, reg, "sprout_source_revision_info", map[string]string{"source": name, "revision": first.Status.Revision}) == -1, nil
	})
}

// TestSourceConflict: a policy name in the cluster and in a folder runs
// from the cluster, and both sources' PolicySources report the conflict.
func TestSourceConflict(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(derivedPolicy("twice", "conflict", "out", "from-dir", true, false)), 0o644); err != nil {
		t.Fatal(err)
	}
	tb := newTable(t, "conflict")
	tb.applyPolicy(derivedPolicy("twice", "conflict", "out", "from-cluster", true, false))
	dirSrc := sources.NewDirectory(dir, 100*time.Millisecond)
	runController(t, func(o *reconcile.Options) {
		o.Sources = []sources.Source{sources.NewCluster(dynamic.NewForConfigOrDie(cfg)), dirSrc}
	})
	want := "GeneratingPolicy/twice is also in "
	for _, s := range []string{sources.ClusterSourceName, dirSrc.Name()} {
		ps := waitForSource(t, "the conflict on "+s, s, func(ps *sproutv1alpha1.PolicySource, _ *metav1.Condition) bool {
			return len(ps.Status.Conflicts) == 1
		})
		if c := ps.Status.Conflicts[0]; !strings.HasPrefix(c, want) || !strings.HasSuffix(c, "; cluster runs it") {
			t.Errorf("%s: conflict %q", s, c)
		}
		poll(t, "the conflict event on "+s, func(ctx context.Context) (bool, error) {
			return hasEvent(sourceEvents(ctx, t, s), reconcile.ReasonPolicyConflict, want), nil
		})
	}
	tb.trigger("a", "conflict", "a1")
	cm := tb.waitFor("the downstream", "a-out", exists)
	if cm.Data["policy"] != "from-cluster" {
		t.Errorf("the downstream came from the copy that does not run: %v", cm.Data)
	}
}
