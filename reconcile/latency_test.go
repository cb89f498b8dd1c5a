package reconcile_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// TestASlowWriteDoesNotHoldTheNextTriggers: the API server holds the
// create of one trigger's object (as it holds a create in a Namespace its
// own cache has not seen yet); a trigger created meanwhile gets its object
// before that create ends, and both are the policy's: the later one's
// object is pruned with its trigger.
func TestASlowWriteDoesNotHoldTheNextTriggers(t *testing.T) {
	const ns = "join"
	tb := newTable(t, ns)
	held := make(chan struct{})
	var holding atomic.Int32
	gated := rest.CopyConfig(cfg)
	gated.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodPost || req.URL.Path != "/api/v1/namespaces/"+ns+"/configmaps" || req.Body == nil {
				return rt.RoundTrip(req)
			}
			body, err := io.ReadAll(req.Body)
			if err != nil {
				return nil, err
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte("slow-out")) {
				holding.Add(1)
				select {
				case <-held:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			return rt.RoundTrip(req)
		})
	})
	opened := false
	open := func() {
		if !opened {
			opened = true
			close(held)
		}
	}
	runControllerOn(t, gated, nil)
	t.Cleanup(open) // before the controller stops: cleanups run last first
	tb.applyPolicy(derivedPolicy("join", "join", "out", "v", true, false))
	t.Cleanup(func() { tb.deletePolicy("join") })
	exists := func(cm *corev1.ConfigMap) bool { return cm != nil }
	// The policy runs, and its next syncs are incremental ones.
	tb.trigger("first", "join", "v")
	tb.waitFor("the first trigger's object", "first-out", exists)

	tb.trigger("slow", "join", "v")
	poll(t, "the slow trigger's create to be held", func(context.Context) (bool, error) { return holding.Load() > 0, nil })
	tb.trigger("next", "join", "v")
	tb.waitFor("the next trigger's object while the slow one's create is held", "next-out", exists)
	if holding.Load() == 0 || tb.get("slow-out") != nil {
		t.Fatal("the slow trigger's create was not held")
	}
	open()
	tb.waitFor("the slow trigger's object", "slow-out", exists)
	tb.delete("next")
	tb.waitFor("the next trigger's object pruned with it", "next-out", func(cm *corev1.ConfigMap) bool { return cm == nil })
	if cm := tb.get("slow-out"); cm == nil || !strings.HasSuffix(cm.Name, "-out") {
		t.Errorf("the slow trigger's object is gone: %v", cm)
	}
}

// TestGeneratedObjectsAreWatchedFromTheCache: the informers of the generated
// objects start from what the API server's cache holds (resourceVersion 0),
// without waiting for it to catch up with every write since, as an
// informer's list did before consistent reads; the triggers' start
// consistent, since a trigger missed would have its objects pruned: a
// list in pages at the newest revision (cluster.Listing says why not a
// watch-list).
func TestGeneratedObjectsAreWatchedFromTheCache(t *testing.T) {
	const ns = "cached-start"
	tb := newTable(t, ns)
	var mu sync.Mutex
	starts := map[string][]string{} // label selector → resourceVersions of initial-event watches and of lists
	watched := rest.CopyConfig(cfg)
	watched.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if req.URL.Path == "/api/v1/configmaps" || strings.HasSuffix(req.URL.Path, "/configmaps") {
				watchList := q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true"
				list := req.Method == http.MethodGet && q.Get("watch") != "true" && q.Get("continue") == "" && q.Get("limit") != ""
				if watchList || list {
					mu.Lock()
					starts[q.Get("labelSelector")] = append(starts[q.Get("labelSelector")], q.Get("resourceVersion"))
					mu.Unlock()
				}
			}
			return rt.RoundTrip(req)
		})
	})
	runControllerOn(t, watched, nil)
	tb.applyPolicy(derivedPolicy("cached-start", "cached-start", "out", "v", true, false))
	t.Cleanup(func() { tb.deletePolicy("cached-start") })
	tb.trigger("a", "cached-start", "v")
	tb.waitFor("the trigger's object", "a-out", func(cm *corev1.ConfigMap) bool { return cm != nil })
	mu.Lock()
	defer mu.Unlock()
	var generated, triggers int
	for selector, versions := range starts {
		for _, rv := range versions {
			switch {
			case strings.Contains(selector, "app=cached-start"):
				triggers++
				if rv != "" {
					t.Errorf("the triggers' watch started at resourceVersion %q, want a consistent start", rv)
				}
			case strings.Contains(selector, watches.GeneratedSelector):
				generated++
				if rv != "0" {
					t.Errorf("the generated objects' watch started at resourceVersion %q, want 0: what the cache holds", rv)
				}
			}
		}
	}
	if generated == 0 || triggers == 0 {
		t.Errorf("watches started: %v; want the triggers' and the generated objects'", starts)
	}
}

// TestEventsReuseTheApplyGoroutines: an incremental sync applies its part
// on a goroutine while it waits for more triggers; the syncs of events
// one after another reuse one kept goroutine rather than starting one
// each, whose stack would grow to a request's depth every time.
func TestEventsReuseTheApplyGoroutines(t *testing.T) {
	const ns, events = "kept", 12
	tb := newTable(t, ns)
	_, c := runController(t, nil)
	tb.applyPolicy(derivedPolicy("kept", "kept", "out", "v", true, false))
	t.Cleanup(func() { tb.deletePolicy("kept") })
	exists := func(cm *corev1.ConfigMap) bool { return cm != nil }
	tb.trigger("t0", "kept", "v")
	tb.waitFor("the first trigger's object", "t0-out", exists)
	before := c.AppliesStarted()
	for i := 1; i <= events; i++ {
		name := fmt.Sprintf("t%d", i)
		tb.trigger(name, "kept", "v")
		tb.waitFor("the object of "+name, name+"-out", exists)
	}
	started := c.AppliesStarted() - before
	if started > 2 {
		t.Errorf("%d goroutines started for the applies of %d events one after another, want at most 2", started, events)
	}
	if c.AppliesStarted() == 0 {
		t.Error("no apply ran on the kept goroutines: the incremental syncs did not take the path this test is about")
	}
}
