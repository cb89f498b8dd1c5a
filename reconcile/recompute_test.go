package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/reconcile"
)

// recompute runs a controller for a test that checks incremental syncs
// against full ones: its writes about the test's objects are logged with
// what they sent, so that a full recompute after them can be checked to
// write nothing and, when it does, say what it changed.
type recompute struct {
	t   *testing.T
	c   *reconcile.Controller
	reg *prometheus.Registry
	log *writeLog
	// said is what the controller logged, debug lines too, for a failure
	// to tell why it synced as it did.
	said *logTail
	dyn  dynamic.Interface
	// about is in the name of each of the test's policies and records and
	// in the path of each of its writes; namespaces are the test's.
	about      string
	namespaces []string
	policies   []string
}

// startRecompute runs a controller until the test ends for the
// GeneratingPolicies named, whose objects live in namespaces.
func startRecompute(t *testing.T, about string, namespaces []string, policies ...string) *recompute {
	t.Helper()
	logged, log := logWrites(cfg, about)
	h := &recompute{t: t, reg: prometheus.NewRegistry(), log: log, said: &logTail{}, dyn: dynamic.NewForConfigOrDie(cfg),
		about: about, namespaces: namespaces, policies: policies}
	opts := reconcile.DefaultOptions()
	opts.Logger = slog.New(slog.NewTextHandler(h.said, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.Metrics = h.reg
	c, stop := launchController(t, logged, opts)
	h.c = c
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return h
}

// syncs reads how many syncs of policy in mode the controller counted.
func (h *recompute) syncs(policy, mode string) float64 {
	h.t.Helper()
	return max(metricValue(h.t, h.reg, "sprout_syncs_total", map[string]string{"policy": "GeneratingPolicy/" + policy, "mode": mode}), 0)
}

// syncsOfAll sums the syncs of the test's policies in mode.
func (h *recompute) syncsOfAll(mode string) float64 {
	h.t.Helper()
	n := 0.0
	for _, p := range h.policies {
		n += h.syncs(p, mode)
	}
	return n
}

// settle waits until the controller is idle and its caches hold what the
// API server holds of the test's objects: every write it made has come back
// to it, so a sync compares with what it wrote, and every change the test
// made has reached it.
func (h *recompute) settle() {
	h.t.Helper()
	h.settleWhen(func() bool { return true })
}

// settleWhen is settle, once cond holds as well.
func (h *recompute) settleWhen(cond func() bool) {
	h.t.Helper()
	var behind string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if !cond() || !h.c.Idle() {
			return false, nil
		}
		var err error
		if behind, err = h.cachesBehind(); err != nil || behind != "" {
			return false, err
		}
		return h.c.Idle(), nil
	})
	if err != nil {
		h.t.Fatalf("waiting for the controller to be idle with its caches up to date: %v (caches behind: %s)", err, behind)
	}
}

// scope is a resource, in a namespace or cluster-wide.
type scope struct {
	gvr       schema.GroupVersionResource
	namespace string
}

// cachesBehind names the first of the test's objects whose version in a
// cache of the controller is not the API server's: a cached object the
// server no longer holds, or one held in another version. An object no
// cache holds is not watched, and so not compared with.
func (h *recompute) cachesBehind() (string, error) {
	scopes := []scope{{gvr: corev1.SchemeGroupVersion.WithResource("namespaces")},
		{gvr: apiv1.GeneratingPolicies}, {gvr: sproutv1alpha1.PolicyInventories}}
	for _, ns := range h.namespaces {
		for _, r := range []string{"configmaps", "secrets"} {
			scopes = append(scopes, scope{gvr: corev1.SchemeGroupVersion.WithResource(r), namespace: ns})
		}
	}
	for _, s := range scopes {
		list, err := h.dyn.Resource(s.gvr).Namespace(s.namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		server := map[string]string{}
		for _, o := range list.Items {
			server[o.GetName()] = o.GetResourceVersion()
		}
		cached := h.c.CachedVersions(s.gvr, s.namespace)
		for _, name := range slices.Sorted(maps.Keys(cached)) {
			if s.namespace == "" && !strings.Contains(name, h.about) {
				continue
			}
			for _, v := range cached[name] {
				if v != server[name] {
					return fmt.Sprintf("%s %s/%s: cached %s, server %q", s.gvr.Resource, s.namespace, name, v, server[name]), nil
				}
			}
		}
	}
	return "", nil
}

// fullSyncWritesNothing waits for the controller to settle, syncs every
// policy in full and checks that this wrote nothing: the incremental syncs
// before it left what a full recompute computes. when says when, for the
// failure, which lists what was written and what it changed.
func (h *recompute) fullSyncWritesNothing(when string) {
	h.t.Helper()
	h.settle()
	before := h.snapshot()
	from := h.log.len()
	fulls := map[string]float64{}
	for _, p := range h.policies {
		fulls[p] = h.syncs(p, "full")
	}
	h.c.ResyncAll()
	h.settleWhen(func() bool {
		for _, p := range h.policies {
			if h.syncs(p, "full") <= fulls[p] {
				return false
			}
		}
		return true
	})
	if w := h.log.since(from); len(w) != 0 {
		h.t.Fatalf("%s, a full sync wrote what the incremental ones left:\n%s", when, h.describe(before, w))
	}
}

// snapshot reads, from the API server, the status of each policy and the
// spec and status of its record, flattened: field path → value.
func (h *recompute) snapshot() map[string]map[string]string {
	h.t.Helper()
	out := map[string]map[string]string{}
	for _, p := range h.policies {
		for _, o := range []struct {
			gvr    schema.GroupVersionResource
			name   string
			fields []string
		}{{apiv1.GeneratingPolicies, p, []string{"status"}}, {sproutv1alpha1.PolicyInventories, "gpol." + p, []string{"spec", "status"}}} {
			fields := map[string]string{}
			if u, err := h.dyn.Resource(o.gvr).Get(context.Background(), o.name, metav1.GetOptions{}); err == nil {
				for _, f := range o.fields {
					flatten(f, u.Object[f], fields)
				}
			}
			out[o.gvr.Resource+"/"+o.name] = fields
		}
	}
	return out
}

// describe lists the writes w, then, field by field, what they changed of
// the policies' status and records since before.
func (h *recompute) describe(before map[string]map[string]string, w []loggedWrite) string {
	var b strings.Builder
	for _, one := range w {
		fmt.Fprintf(&b, "  %s\n    %s\n", one.what, one.body)
	}
	after := h.snapshot()
	changed := false
	for _, obj := range slices.Sorted(maps.Keys(after)) {
		was, now := before[obj], after[obj]
		fields := slices.Collect(maps.Keys(was))
		for f := range now {
			if _, ok := was[f]; !ok {
				fields = append(fields, f)
			}
		}
		slices.Sort(fields)
		for _, f := range fields {
			if was[f] != now[f] {
				fmt.Fprintf(&b, "  %s %s: %q → %q\n", obj, f, was[f], now[f])
				changed = true
			}
		}
	}
	if !changed {
		b.WriteString("  no field of the policies' status or records changed: the writes repeated what the server held\n")
	}
	return b.String()
}

// flatten adds the leaves of v to out, by path.
func flatten(path string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			flatten(path+"."+k, e, out)
		}
	case []any:
		for i, e := range v {
			flatten(fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	default:
		out[path] = fmt.Sprint(v)
	}
}

// logTail keeps the last lines a controller logged.
type logTail struct {
	mu      sync.Mutex
	lines   []string
	dropped int
}

// logTailMax bounds the lines a logTail keeps.
const logTailMax = 4096

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	if len(l.lines) > logTailMax {
		l.dropped += logTailMax / 2
		l.lines = slices.Delete(l.lines, 0, logTailMax/2)
	}
	return len(p), nil
}

// len counts the lines logged so far.
func (l *logTail) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped + len(l.lines)
}

// since returns the lines logged after the first n that contain about.
func (l *logTail) since(n int, about string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, line := range l.lines[min(max(n-l.dropped, 0), len(l.lines)):] {
		if strings.Contains(line, about) {
			b.WriteString("  " + line)
		}
	}
	return b.String()
}

// writeLog keeps the writes, not reads, whose path contains about, with
// the start of what each sent.
type writeLog struct {
	next  http.RoundTripper
	about string
	mu    sync.Mutex
	seen  []loggedWrite
}

type loggedWrite struct{ what, body string }

// maxLoggedBody bounds the part of a write's body a writeLog keeps.
const maxLoggedBody = 2048

// logWrites returns a copy of config whose writes about s log keeps.
func logWrites(config *rest.Config, about string) (*rest.Config, *writeLog) {
	logged := rest.CopyConfig(config)
	log := &writeLog{about: about}
	logged.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		log.next = rt
		return log
	})
	return logged, log
}

func (l *writeLog) RoundTrip(req *http.Request) (*http.Response, error) {
	path := controlplane.ObjectPath(req)
	if req.Method == http.MethodGet || !strings.Contains(path, l.about) {
		return l.next.RoundTrip(req)
	}
	what := req.Method + " " + path
	if req.Method == http.MethodPatch {
		what += " (" + req.Header.Get("Content-Type") + ")"
	}
	if req.URL.Query().Has("dryRun") {
		what += " (dry run)"
	}
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	l.mu.Lock()
	l.seen = append(l.seen, loggedWrite{what: what, body: shown(body, req.Header.Get("Content-Type"))})
	l.mu.Unlock()
	return l.next.RoundTrip(req)
}

// shown is the start of a write's body, compacted when it is JSON.
func shown(body []byte, contentType string) string {
	var compact bytes.Buffer
	if json.Compact(&compact, body) != nil {
		return fmt.Sprintf("(%d bytes of %s)", len(body), contentType)
	}
	if compact.Len() > maxLoggedBody {
		return compact.String()[:maxLoggedBody] + "…"
	}
	return compact.String()
}

func (l *writeLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// since returns the writes after the first n.
func (l *writeLog) since(n int) []loggedWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen[n:])
}
