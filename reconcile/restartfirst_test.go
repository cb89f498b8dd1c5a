package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/internal/syncbuf"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/reconcile/ledger"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// TestRestartWritesForANewTriggerFirst: a trigger created while Sprout was
// stopped gets its object from the restart's first sync before the
// triggers listed ahead of it, whose objects exist, are evaluated again.
// The evaluation of the first of those is held (its http.Get does not
// answer) until the new trigger's object exists: it comes while the hold
// lasts only if the new trigger was evaluated first.
func TestRestartWritesForANewTriggerFirst(t *testing.T) {
	const ns, known = "restart-first", 70 // more than a sync's first part
	url, opts, hold, release := tierServer(t, "k-00")
	tb := newTable(t, ns)
	for i := range known {
		tb.trigger(fmt.Sprintf("k-%02d", i), "first", "x")
	}
	tb.applyPolicy(tierPerTriggerPolicy("restart-first", ns, url))
	t.Cleanup(func() { tb.deletePolicy("restart-first") })
	exists := func(cm *corev1.ConfigMap) bool { return cm != nil }

	_, stop := launchController(t, cfg, opts)
	for i := range known {
		tb.waitFor("the known triggers' objects", fmt.Sprintf("k-%02d-tier", i), exists)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	tb.trigger("zz-new", "first", "x")
	hold()
	_, stop = launchController(t, cfg, opts)
	t.Cleanup(func() {
		release.do()
		if err := stop(); err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	tb.waitFor("the new trigger's object while the first known trigger's evaluation is held", "zz-new-tier", exists)
}

// TestRestartWaitsForTheListOfItsObjects: in a restart's first match, the
// triggers not known changed wait for the caches of the policy's objects,
// which tell those whose objects exist. A list of those objects slower than
// the sync waits for sends the sync back to the queue: it does not take
// every trigger as new and evaluate the known ones first. No known trigger
// is evaluated while the list is held, which lasts until the sync has gone
// back to the queue; then the new trigger's object comes.
func TestRestartWaitsForTheListOfItsObjects(t *testing.T) {
	const ns, name, known = "restart-wait", "restart-wait", 5
	var held atomic.Bool
	var early atomic.Int32 // known triggers evaluated while the list is held
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if held.Load() && strings.Contains(r.URL.Path, "/k-") {
			early.Add(1)
		}
		_, _ = io.WriteString(w, `{"tier": "gold"}`)
	}))
	t.Cleanup(srv.Close)
	web, err := celenv.NewHTTP(celenv.HTTPOptions{AllowedHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	opts := reconcile.DefaultOptions()
	opts.HTTP = web
	logTo(t, &opts)
	tb := newTable(t, ns)
	for i := range known {
		tb.trigger(fmt.Sprintf("k-%d", i), "first", "x")
	}
	tb.applyPolicy(tierPerTriggerPolicy(name, ns, srv.URL))
	t.Cleanup(func() { tb.deletePolicy(name) })
	exists := func(cm *corev1.ConfigMap) bool { return cm != nil }
	_, stop := launchController(t, cfg, opts)
	for i := range known {
		tb.waitFor("the known triggers' objects", fmt.Sprintf("k-%d-tier", i), exists)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	tb.trigger("zz-new", "first", "x")

	released := make(chan struct{})
	release := sync.OnceFunc(func() { held.Store(false); close(released) })
	t.Cleanup(release)
	slow := rest.CopyConfig(cfg)
	slow.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/configmaps") &&
				q.Get("labelSelector") == watches.GeneratedSelector && (q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true") {
				select {
				case <-released:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			return rt.RoundTrip(req)
		})
	})
	reg := prometheus.NewRegistry()
	opts.Metrics = reg
	held.Store(true)
	_, stop = launchController(t, slow, opts)
	t.Cleanup(func() {
		release()
		if err := stop(); err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	poll(t, "the restart's sync going back to the queue while its objects' list is held", func(context.Context) (bool, error) {
		return metricValue(t, reg, "sprout_syncs_total", map[string]string{"policy": "GeneratingPolicy/" + name, "mode": "full"}) >= 2, nil
	})
	release()
	if n := early.Load(); n > 0 {
		t.Errorf("%d known triggers evaluated before the list of the policy's objects came", n)
	}
	tb.waitFor("the new trigger's object", "zz-new-tier", exists)
}

// TestRestartCatchesUpEachPolicyFromItsOwnRecord: two policies share the
// informer of every ConfigMap, one whose record was last written before
// the other's known triggers were created. The restart's watch from the
// earlier record finds those triggers changed, and the other policy must
// not take them as new: it writes first for the trigger created while
// Sprout was stopped, while the evaluation of its first known trigger is
// held and the list of triggers too.
func TestRestartCatchesUpEachPolicyFromItsOwnRecord(t *testing.T) {
	const early, ns, name, known = "aa-catchup-early", "catchup-own", "zz-catchup-own", 5
	url, opts, hold, release := tierServer(t, "k-0")
	exists := func(cm *corev1.ConfigMap) bool { return cm != nil }
	whole := func(policy string) {
		t.Helper()
		poll(t, "the record of "+policy, func(ctx context.Context) (bool, error) {
			rec, err := recordOf(ctx, "gpol."+policy)
			return rec != nil && rec.Labels[ledger.LabelRebuilding] == "", err
		})
	}

	// The early policy does not synchronize: it watches every ConfigMap.
	tbEarly := newTable(t, early)
	tbEarly.applyPolicy(derivedPolicy(early, early, "out", "v", false, false))
	t.Cleanup(func() { tbEarly.deletePolicy(early) })
	tbEarly.trigger("e", early, "x")
	_, stop := launchController(t, cfg, opts)
	tbEarly.waitFor("the early policy's object", "e-out", exists)
	whole(early)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	tb := newTable(t, ns)
	for i := range known {
		tb.trigger(fmt.Sprintf("k-%d", i), "first", "x")
	}
	tb.applyPolicy(tierPerTriggerPolicy(name, ns, url))
	t.Cleanup(func() { tb.deletePolicy(name) })
	_, stop = launchController(t, cfg, opts)
	for i := range known {
		tb.waitFor("the known triggers' objects", fmt.Sprintf("k-%d-tier", i), exists)
	}
	whole(name)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	tb.trigger("zz-new", "first", "x")
	hold()
	held := rest.CopyConfig(cfg)
	held.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if req.Method == http.MethodGet && req.URL.Path == "/api/v1/configmaps" && q.Get("labelSelector") == "" &&
				(q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true") {
				if err := release.wait(req.Context()); err != nil {
					return nil, err
				}
			}
			return rt.RoundTrip(req)
		})
	})
	_, stop = launchController(t, held, opts)
	t.Cleanup(func() {
		release.do()
		if err := stop(); err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	tb.waitFor("the new trigger's object while the list and the first known trigger's evaluation are held", "zz-new-tier", exists)
}

// tierPerTriggerPolicy generates, for every ConfigMap labelled app=first
// in ns, <name>-tier holding what http.Get of <url>/tier/<name> answers.
func tierPerTriggerPolicy(name, ns, url string) string {
	return fmt.Sprintf(`apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata:
  name: %[1]s
spec:
  evaluation:
    generateExisting: {enabled: true}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: %[2]s}
    objectSelector:
      matchLabels: {app: first}
  variables:
  - name: answer
    expression: http.Get("%[3]s/tier/" + object.metadata.name)
  generate:
  - expression: >-
      generator.Apply(object.metadata.namespace, [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": object.metadata.name + "-tier"}, "data": {"tier": variables.answer.tier}}])
`, name, ns, url)
}

// TestRestartFindsANewTriggerBeforeTheLists: a trigger created while
// Sprout was stopped gets its object from the restart's first sync while
// both the list of the triggers and that of the policy's objects are held.
// A watch from the policy's record's last write finds the trigger, and a
// trigger changed since that write is written for without waiting to know
// which objects exist. Without the watch nothing is written until the
// lists come.
func TestRestartFindsANewTriggerBeforeTheLists(t *testing.T) {
	const ns, app, name = "restart-catchup", "catchup", "restart-catchup"
	tb := newTable(t, ns)
	for i := range 3 {
		tb.trigger(fmt.Sprintf("k-%d", i), app, "x")
	}
	tb.applyPolicy(generatingExisting(derivedPolicy(name, app, "out", "v", true, false)))
	t.Cleanup(func() { tb.deletePolicy(name) })
	exists := func(cm *corev1.ConfigMap) bool { return cm != nil }
	_, stop := launchController(t, cfg, reconcile.DefaultOptions())
	for i := range 3 {
		tb.waitFor("the known triggers' objects", fmt.Sprintf("k-%d-out", i), exists)
	}
	// A record still rebuilding takes the caches to know what the policy
	// admitted: only a whole record lets a trigger go first.
	poll(t, "the policy's record", func(ctx context.Context) (bool, error) {
		rec, err := recordOf(ctx, "gpol."+name)
		return rec != nil && rec.Labels[ledger.LabelRebuilding] == "", err
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	tb.trigger("zz-new", app, "x")

	released := make(chan struct{})
	release := sync.OnceFunc(func() { close(released) })
	t.Cleanup(release)
	var lists atomic.Int32
	held := rest.CopyConfig(cfg)
	held.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/configmaps") &&
				(q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true") {
				lists.Add(1)
				select {
				case <-released:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			return rt.RoundTrip(req)
		})
	})
	_, stop = launchController(t, held, reconcile.DefaultOptions())
	t.Cleanup(func() {
		release()
		if err := stop(); err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	tb.waitFor("the new trigger's object while the lists are held", "zz-new-out", exists)
	if n := lists.Load(); n < 2 {
		t.Fatalf("%d lists of ConfigMaps held, want the triggers' and the objects'", n)
	}
	// The list brings the new trigger again: it is counted once.
	release()
	poll(t, "the sync's counts of 4 triggers and 4 objects", func(ctx context.Context) (bool, error) {
		rec, err := recordOf(ctx, "gpol."+name)
		return rec != nil && rec.Status.Triggers == 4 && rec.Status.Objects == 4, err
	})
}

// tierServer answers tierPerTriggerPolicy's http.Get with a tier, and
// returns its url and the options of controllers that may call it, whose
// logs a failed test shows. After hold, the request for the trigger named
// held waits for release (or its own end).
func tierServer(t *testing.T, held string) (string, reconcile.Options, func(), *gate) {
	t.Helper()
	var holding atomic.Bool
	release := newGate()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if holding.Load() && strings.HasSuffix(r.URL.Path, "/"+held) && release.wait(r.Context()) != nil {
			return
		}
		_, _ = io.WriteString(w, `{"tier": "gold"}`)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(release.do) // before the server closes: cleanups run last first
	web, err := celenv.NewHTTP(celenv.HTTPOptions{AllowedHosts: []string{"127.0.0.1"}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	opts := reconcile.DefaultOptions()
	opts.HTTP, opts.EvaluationTimeout = web, time.Minute
	logTo(t, &opts)
	return srv.URL, opts, func() { holding.Store(true) }, release
}

// gate holds whoever waits until it opens, once.
type gate struct {
	open chan struct{}
	do   func()
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	g.do = sync.OnceFunc(func() { close(g.open) })
	return g
}

// wait waits for the gate to open, or for ctx.
func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// logTo has the controllers opts makes log into a buffer that a failed
// test shows.
func logTo(t *testing.T, opts *reconcile.Options) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
}
