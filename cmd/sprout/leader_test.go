package main

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sprout-gitops/sprout/internal/controlplane"
)

// metricSum adds up the values of the series of a metric whose line
// contains every one of labels, in a Prometheus exposition.
func metricSum(exposition, name string, labels ...string) float64 {
	sum := 0.0
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if f := strings.Fields(line); ok && len(f) == 2 {
			v, _ := strconv.ParseFloat(f[1], 64)
			sum += v
		}
	}
	return sum
}

func startControlPlane(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	cp, err := controlplane.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	return cp
}

// TestLeaderFailover: two sprout processes with --leader-elect; one leads,
// the other stands by (and is ready). On SIGTERM the leader finishes,
// releases the Lease and exits; the other takes over, and for a world that
// has not changed the handover costs no write at all.
func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	applyScenario(t, cp, "zk-kafka-address", "policy.yaml", "triggers.yaml")
	proxy := newAPIProxy(t, cp.Config)
	kubeconfig := proxy.kubeconfig(t)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	leaderFlags := []string{"--leader-elect", "--leader-election-namespace", "default",
		"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "250ms"}
	policy := `policy="GeneratingPolicy/zk-kafka-address"`
	syncs := func(ctx context.Context, p *process) float64 {
		_, m := p.get(ctx, p.metric(), "/metrics")
		return metricSum(m, "sprout_reconcile_duration_seconds_count", policy)
	}

	a := startProcess(t, kubeconfig, leaderFlags...)
	eventually(t, "the first replica to generate", func(ctx context.Context) bool {
		_, err := kube.CoreV1().ConfigMaps("team-red").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		return err == nil && syncs(ctx, a) >= 1
	})
	lease, err := kube.CoordinationV1().Leases("default").Get(context.Background(), "sprout", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("the Lease: %v %v", lease, err)
	}
	holderA := *lease.Spec.HolderIdentity

	b := startProcess(t, kubeconfig, leaderFlags...)
	eventually(t, "the second replica to stand by, ready", func(ctx context.Context) bool {
		code, _ := b.get(ctx, b.probes(), "/readyz")
		return code == http.StatusOK && strings.Contains(b.logs.String(), "standing by")
	})
	if n := syncs(context.Background(), b); n != 0 {
		t.Fatalf("the standby replica synced %v times", n)
	}

	proxy.reset()
	if err := a.stop(t, 15*time.Second); err != nil {
		t.Fatalf("the leader's exit after SIGTERM: %v\n%s", err, a.logs.String())
	}
	eventually(t, "the second replica to take over and sync", func(ctx context.Context) bool {
		return syncs(ctx, b) >= 1
	})
	lease, err = kube.CoordinationV1().Leases("default").Get(context.Background(), "sprout", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == holderA {
		t.Fatalf("the Lease after the handover: %v %v", lease, err)
	}
	if n := proxy.writes.Load(); n != 0 {
		t.Errorf("the handover of an unchanged world made %d write requests: %v", n, proxy.written())
	}
	if !regexp.MustCompile(`waiting for the lease`).MatchString(b.logs.String()) {
		t.Errorf("the second replica did not say it waited for the lease")
	}

	// The new leader works.
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-red-2", Labels: map[string]string{"color": "red"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new leader to generate", func(ctx context.Context) bool {
		_, err := kube.CoreV1().ConfigMaps("team-red-2").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		return err == nil
	})
}

// TestProbesAndMetrics: /readyz fails until the caches have synced (held
// back here at the proxy) while /healthz answers; after a sync /metrics
// has the named series with the values the sync implies.
func TestProbesAndMetrics(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	applyScenario(t, cp, "zk-kafka-address", "policy.yaml", "triggers.yaml")
	proxy := newAPIProxy(t, cp.Config)
	release := proxy.hold("/policyinventories")
	defer release()
	p := startProcess(t, proxy.kubeconfig(t))

	eventually(t, "/healthz", func(ctx context.Context) bool {
		code, _ := p.get(ctx, p.probes(), "/healthz")
		return code == http.StatusOK
	})
	for range 3 {
		if code, body := p.get(context.Background(), p.probes(), "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not synced") {
			t.Fatalf("/readyz before the caches synced: %d %q", code, body)
		}
	}
	release()
	eventually(t, "/readyz", func(ctx context.Context) bool {
		code, _ := p.get(ctx, p.probes(), "/readyz")
		return code == http.StatusOK
	})

	policy := `policy="GeneratingPolicy/zk-kafka-address"`
	var m string
	eventually(t, "the sync in /metrics", func(ctx context.Context) bool {
		_, m = p.get(ctx, p.metric(), "/metrics")
		return metricSum(m, "sprout_objects_total", policy, `action="created"`) == 1
	})
	for _, c := range []struct {
		name   string
		labels []string
		ok     func(float64) bool
	}{
		{"sprout_reconcile_duration_seconds_count", []string{policy}, func(v float64) bool { return v >= 1 }},
		{"sprout_reconcile_errors_total", []string{policy}, func(v float64) bool { return v == 0 }},
		{"sprout_evaluation_errors_total", []string{policy}, func(v float64) bool { return v == 0 }},
		{"sprout_informers", []string{`kind="trigger"`}, func(v float64) bool { return v == 1 }},
		{"sprout_informers", []string{`kind="generated"`}, func(v float64) bool { return v == 1 }},
		{"sprout_workqueue_adds_total", []string{`name="policies"`}, func(v float64) bool { return v >= 1 }},
		{"sprout_workqueue_depth", []string{`name="policies"`}, func(v float64) bool { return v == 0 }},
		{"sprout_source_ready", []string{`source="cluster"`}, func(v float64) bool { return v == 1 }},
		{"sprout_source_policies", []string{`source="cluster"`}, func(v float64) bool { return v == 1 }},
		{"process_resident_memory_bytes", nil, func(v float64) bool { return v > 0 }},
	} {
		if v := metricSum(m, c.name, c.labels...); !c.ok(v) {
			t.Errorf("%s%v = %v", c.name, c.labels, v)
		}
	}
}
