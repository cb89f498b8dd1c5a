package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/sources"
)

// eventsOn lists the Events on one object.
func eventsOn(ctx context.Context, t *testing.T, namespace, kind, name string) []corev1.Event {
	t.Helper()
	list, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// eventCount sums the counts of the Events with reason.
func eventCount(events []corev1.Event, reason string) int {
	n := 0
	for _, e := range events {
		if e.Reason == reason {
			n += int(e.Count)
		}
	}
	return n
}

// TestMetricsAndEvents: a sync is counted in the controller's metrics and
// told in Events on the policy and, when asked, on the trigger; a failure
// retried with back-off is one Event, however many retries.
func TestMetricsAndEvents(t *testing.T) {
	reg := prometheus.NewRegistry()
	runController(t, func(o *reconcile.Options) {
		o.Metrics = reg
		o.TriggerEvents = true
	})
	tb := newTable(t, "observe")
	tb.applyPolicy(derivedPolicy("observe", "observe", "out", "one", true, false))
	tb.trigger("a", "observe", "a1")
	tb.waitFor("the downstream", "a-out", exists)

	policy := map[string]string{"policy": "GeneratingPolicy/observe"}
	poll(t, "the sync in the metrics", func(context.Context) (bool, error) {
		return metricValue(t, reg, "sprout_objects_total", map[string]string{"policy": "GeneratingPolicy/observe", "action": "created"}) >= 1, nil
	})
	for name, labels := range map[string]map[string]string{
		"sprout_workqueue_adds_total": {"name": "policies"},
		"sprout_informers":            {"kind": "trigger"},
	} {
		if v := metricValue(t, reg, name, labels); v < 1 {
			t.Errorf("%s%v = %v", name, labels, v)
		}
	}
	if n := histogramCount(t, reg, "sprout_reconcile_duration_seconds", policy); n < 1 {
		t.Errorf("sprout_reconcile_duration_seconds has %d observations", n)
	}
	poll(t, "the Generated event on the policy and on the trigger", func(ctx context.Context) (bool, error) {
		onPolicy := eventsOn(ctx, t, "default", "GeneratingPolicy", "observe")
		onTrigger := eventsOn(ctx, t, "observe", "ConfigMap", "a")
		return hasEvent(onPolicy, reconcile.ReasonGenerated, "created 1", "ConfigMap/observe/a-out") &&
			hasEvent(onTrigger, reconcile.ReasonGenerated, "GeneratingPolicy/observe", "ConfigMap/observe/a-out"), nil
	})

	// An object name the API server rejects: the sync fails and is retried.
	tb.applyPolicy(derivedPolicy("observe-bad", "observe-bad", "UPPER", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("observe-bad") })
	tb.trigger("b", "observe-bad", "b1") // created after the policy: admitted
	bad := map[string]string{"policy": "GeneratingPolicy/observe-bad", "reason": reconcile.ReasonApplyFailed}
	poll(t, "three failed syncs", func(context.Context) (bool, error) {
		return metricValue(t, reg, "sprout_reconcile_errors_total", bad) >= 3, nil
	})
	events := eventsOn(context.Background(), t, "default", "GeneratingPolicy", "observe-bad")
	if n := eventCount(events, reconcile.ReasonApplyFailed); n != 1 {
		t.Errorf("%d ApplyFailed events for one failure retried: %v", n, events)
	}
	if !hasEvent(events, reconcile.ReasonApplyFailed, "b-UPPER") {
		t.Errorf("the failure event does not name the object: %v", events)
	}
	tb.deletePolicy("observe")
	tb.waitFor("the policy's downstream to go", "a-out", absent)
}

// histogramCount returns how many observations a histogram series holds.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) uint64 {
	t.Helper()
	return findMetric(t, reg, name, labels).GetHistogram().GetSampleCount()
}

// TestEvaluationsAreKept: a sync evaluates again only the triggers that
// changed; the others' results are reused.
func TestEvaluationsAreKept(t *testing.T) {
	reg := prometheus.NewRegistry()
	runController(t, func(o *reconcile.Options) { o.Metrics = reg })
	tb := newTable(t, "memo")
	tb.applyPolicy(derivedPolicy("memo", "memo", "out", "one", true, false))
	for _, name := range []string{"a", "b", "c"} {
		tb.trigger(name, "memo", name+"1")
	}
	for _, name := range []string{"a", "b", "c"} {
		tb.waitFor(name+"'s downstream", name+"-out", exists)
	}
	count := func(result string) float64 {
		return metricValue(t, reg, "sprout_evaluations_total", map[string]string{"policy": "GeneratingPolicy/memo", "result": result})
	}
	evaluated, reused := count("evaluated"), count("reused")

	// The sync of a's update is incremental (b and c are not looked at) or
	// full (their results are reused): either way only a is evaluated.
	tb.trigger("a", "memo", "a2")
	tb.waitFor("a's downstream updated", "a-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["from"] == "a2" })
	if n := count("evaluated") - evaluated; n != 1 {
		t.Errorf("%v evaluations after one trigger changed, want 1 (metrics before: %v evaluated, %v reused)", n, evaluated, reused)
	}
	tb.deletePolicy("memo")
}

// TestSettledEvaluationsRepairDrift: once a sync found a kept evaluation's
// objects unchanged in the cache, the evaluation drops them (they settle).
// The objects a sync created are confirmed by a sync that follows their
// arrival in the cache, with no other event (the triggers are Namespaces,
// the objects ConfigMaps). An edit to one of them, or its deletion,
// evaluates that trigger alone again, and the object is put back.
func TestSettledEvaluationsRepairDrift(t *testing.T) {
	reg := prometheus.NewRegistry()
	runController(t, func(o *reconcile.Options) { o.Metrics = reg })
	applyColorPolicy(t, "settle", "settle", nil)
	const name = "zk-kafka-address"
	for _, ns := range []string{"settle-a", "settle-b", "settle-c"} {
		createNamespace(t, ns, map[string]string{"color": "settle"})
		poll(t, ns+"'s ConfigMap", func(ctx context.Context) (bool, error) {
			cm, err := getConfigMap(ctx, ns, name)
			return cm != nil, err
		})
	}
	count := func(result string) float64 {
		return metricValue(t, reg, "sprout_evaluations_total", map[string]string{"policy": "GeneratingPolicy/settle", "result": result})
	}
	poll(t, "the three objects settled", func(context.Context) (bool, error) {
		return metricValue(t, reg, "sprout_settled_objects", map[string]string{"policy": "GeneratingPolicy/settle"}) == 3, nil
	})
	evaluated := count("evaluated")

	kube := kubernetes.NewForConfigOrDie(cfg).CoreV1()
	ctx := context.Background()
	if _, err := kube.ConfigMaps("settle-b").Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"ZK_ADDRESS":"edited"}}`),
		metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	poll(t, "settle-b's ConfigMap reverted", func(ctx context.Context) (bool, error) {
		cm, err := getConfigMap(ctx, "settle-b", name)
		return cm != nil && cm.Data["ZK_ADDRESS"] != "edited", err
	})
	if n := count("evaluated") - evaluated; n != 1 {
		t.Errorf("%v evaluations after settle-b's ConfigMap was edited, want 1", n)
	}
	evaluated = count("evaluated")
	if err := kube.ConfigMaps("settle-c").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "settle-c's ConfigMap back", func(ctx context.Context) (bool, error) {
		cm, err := getConfigMap(ctx, "settle-c", name)
		return cm != nil, err
	})
	if n := count("evaluated") - evaluated; n != 1 {
		t.Errorf("%v evaluations after settle-c's ConfigMap was deleted, want 1", n)
	}
}

// TestNamespaceTriggersListNamespacesOnce: a policy whose only triggers are
// Namespaces watches them once, with its trigger informer; the Namespace
// informer that match constraints read for namespaced triggers is not
// started, so 10,000 Namespaces are not listed and held twice.
func TestNamespaceTriggersListNamespacesOnce(t *testing.T) {
	dir := fixtureDir(t, "list-once")
	counted := rest.CopyConfig(cfg)
	var lists atomic.Int64
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if q := req.URL.Query(); req.Method == http.MethodGet && req.URL.Path == "/api/v1/namespaces" &&
				(q.Get("watch") != "true" && q.Get("continue") == "" || q.Get("sendInitialEvents") == "true") {
				lists.Add(1) // a list's first page, or a watch-list
			}
			return rt.RoundTrip(req)
		})
	})
	runUntilSyncedWith(t, counted, func(o *reconcile.Options) {
		o.Sources = []sources.Source{sources.NewDirectory(dir, time.Second)}
	}, "GeneratingPolicy/list-once")
	if n := lists.Load(); n != 1 {
		t.Errorf("Namespaces listed or watched %d times, want once", n)
	}
}

// fixtureDir returns a folder holding the zk-kafka-address fixture policy,
// named name, for a directory source: no other test's policy is run with it.
func fixtureDir(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile("../fixtures/zk-kafka-address/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	policy := strings.Replace(string(raw), "name: zk-kafka-address", "name: "+name, 1)
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestFirstSyncFollowsTheTriggerList: a policy whose triggers are not
// listed yet waits, backing off up to seconds; once the list is in, it
// syncs at once, not when its back-off runs out. The API server is made to
// answer the first page of the Namespace list 2 s late, by which time the
// back-off is 1.6 s; the list is in when its last page is answered (the
// test cluster holds the Namespaces of every test, a page or more).
func TestFirstSyncFollowsTheTriggerList(t *testing.T) {
	dir := fixtureDir(t, "list-late")
	const late = 2 * time.Second
	slow := rest.CopyConfig(cfg)
	var answered atomic.Int64 // when a page of the Namespace list was last answered, in Unix nanoseconds
	slow.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if req.Method != http.MethodGet || req.URL.Path != "/api/v1/namespaces" || q.Get("watch") == "true" {
				return rt.RoundTrip(req)
			}
			if q.Get("continue") == "" {
				select { // a slow server, not a wait for the test's sake
				case <-time.After(late):
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			resp, err := rt.RoundTrip(req)
			answered.Store(time.Now().UnixNano())
			return resp, err
		})
	})
	var synced atomic.Int64
	runControllerOn(t, slow, func(o *reconcile.Options) {
		o.Sources = []sources.Source{sources.NewDirectory(dir, time.Second)}
		o.OnSync = func(p string, err error) {
			if p == "GeneratingPolicy/list-late" && err == nil {
				synced.CompareAndSwap(0, time.Now().UnixNano())
			}
		}
	})
	poll(t, "the first sync", func(context.Context) (bool, error) { return synced.Load() != 0, nil })
	if answered.Load() == 0 {
		t.Fatal("synced before the Namespace list was answered")
	}
	t.Logf("first sync %v after the trigger list", time.Duration(synced.Load()-answered.Load()))
	// Its back-off would have it wait up to 1.6 s more.
	if after := time.Duration(synced.Load() - answered.Load()); after > 500*time.Millisecond {
		t.Errorf("the first sync came %v after the trigger list, want it at once", after)
	}
}

// TestResyncDuringADiscoveryOutage: a scheduled resync forgets the kind
// mappings, so that discovery is asked again; while discovery fails, the
// mappings known before the resync stand in. Syncs go on succeeding, and
// discovery is not asked for every object.
func TestResyncDuringADiscoveryOutage(t *testing.T) {
	dir := fixtureDir(t, "discovery-down")
	var down atomic.Bool
	var asked atomic.Int64 // discovery requests while down
	flaky := rest.CopyConfig(cfg)
	flaky.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			p := req.URL.Path
			if discovery := p == "/api" || p == "/apis" || strings.Count(p, "/") <= 3 && (strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/apis/")); down.Load() && discovery {
				asked.Add(1)
				return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Content-Type": {"text/plain"}},
					Body: io.NopCloser(strings.NewReader("discovery is down")), Request: req}, nil
			}
			return rt.RoundTrip(req)
		})
	})
	var syncs, failures atomic.Int64
	runControllerOn(t, flaky, func(o *reconcile.Options) {
		o.Sources = []sources.Source{sources.NewDirectory(dir, time.Second)}
		o.ResyncSchedule = "@every 1s"
		o.OnSync = func(p string, err error) {
			switch {
			case p != "GeneratingPolicy/discovery-down":
			case err != nil:
				failures.Add(1)
			default:
				syncs.Add(1)
			}
		}
	})
	poll(t, "the first sync", func(context.Context) (bool, error) { return syncs.Load() > 0, nil })
	ns := fmt.Sprintf("discovery-down-%d", time.Now().UnixNano()%1e9) // Namespaces are not deleted here
	createNamespace(t, ns, map[string]string{"color": "red"})
	poll(t, "the ConfigMap generated", func(ctx context.Context) (bool, error) {
		cm, err := getConfigMap(ctx, ns, "zk-kafka-address")
		return cm != nil, err
	})

	down.Store(true)
	before := syncs.Load()
	failed := failures.Load()
	poll(t, "three syncs through resyncs with discovery down", func(context.Context) (bool, error) {
		return syncs.Load() >= before+3, nil
	})
	down.Store(false)
	if n := failures.Load() - failed; n != 0 {
		t.Errorf("%d syncs failed while discovery was down", n)
	}
	switch n := asked.Load(); {
	case n == 0:
		t.Error("no sync asked discovery while it was down: no resync forgot the mappings")
	case n > 30:
		t.Errorf("discovery was asked %d times during three syncs", n)
	}
}
