package reconcile_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/reconcile"
)

// Who the controller is (Options.Identify) is asked while the records,
// the policies and their triggers are read, not before them: a start waits
// for the longest, not for their sum. No policy is synced before it is
// known.
func TestStartReadsWhileIdentifying(t *testing.T) {
	applyColorPolicy(t, "identify", "identify", nil)
	createNamespace(t, "identify-red", map[string]string{"color": "identify"})

	// What the controller asked, in order, when Identify returned and when
	// the policy synced.
	var mu sync.Mutex
	var asked []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, s)
	}
	sent := make(chan string, 4096)
	watched := rest.CopyConfig(cfg)
	watched.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("watch") == "true" {
				note(req.URL.Path)
				select {
				case sent <- req.URL.Path:
				default:
				}
			}
			return rt.RoundTrip(req)
		})
	})
	const identified, synced = "identified", "synced"
	controller := make(chan *reconcile.Controller, 1)
	_, c := runControllerOn(t, watched, func(o *reconcile.Options) {
		o.OnSync = func(policy string, err error) {
			if policy == "GeneratingPolicy/identify" {
				note(synced)
			}
		}
		o.Identify = func(ctx context.Context) error {
			defer note(identified)
			// Returns once all three are being read: a start that asked
			// first and read after would never get here.
			var records, policies, triggers bool
			for !records || !policies || !triggers {
				select {
				case p := <-sent:
					records = records || strings.HasSuffix(p, "/policyinventories")
					policies = policies || strings.HasSuffix(p, "/generatingpolicies")
					triggers = triggers || p == "/api/v1/namespaces"
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			// The key, given as `sprout run` gives it (no Options.ProofKey).
			select {
			case c := <-controller:
				return c.Prove(testProofKey, "default", "sprout-proof-key")
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	controller <- c
	poll(t, "ConfigMap in identify-red, its sync ended", func(ctx context.Context) (bool, error) {
		mu.Lock()
		ended := slices.Contains(asked, synced)
		mu.Unlock()
		cm, err := getConfigMap(ctx, "identify-red", "zk-kafka-address")
		return ended && cm != nil, err
	})

	mu.Lock()
	defer mu.Unlock()
	at, sync := slices.Index(asked, identified), slices.Index(asked, synced)
	if at < 0 || sync < at {
		t.Errorf("the policy synced at %d, Identify returned at %d, want after: %v", sync, at, asked)
	}
}

// An error of Identify ends Run with it, and the controller takes no
// policy.
func TestIdentifyErrorEndsRun(t *testing.T) {
	errNoKey := errors.New("no proof key")
	opts := reconcile.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	opts.ProofKey = testProofKey
	opts.Identify = func(context.Context) error { return errNoKey }
	c, err := reconcile.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Run(ctx); !errors.Is(err, errNoKey) {
		t.Fatalf("Run = %v, want %v", err, errNoKey)
	}
	if ctx.Err() != nil {
		t.Fatal("Run returned only when its context ended")
	}
}

// On a restart, the resources a policy's record says it wrote to are
// watched as the policy is taken, beside its triggers: its first sync
// does not wait for their lists after its trigger list. Here the trigger
// list is held until the generated objects' watch has been asked for: a
// start that asked for it only in the first sync never syncs.
func TestRestartWatchesWhatTheRecordNamesBesideTheTriggers(t *testing.T) {
	applyColorPolicy(t, "early", "early", nil)
	createNamespace(t, "early-red", map[string]string{"color": "early"})
	runUntilSynced(t, cfg, "GeneratingPolicy/early")

	generatedWatched := make(chan struct{})
	var once sync.Once
	held := rest.CopyConfig(cfg)
	held.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("watch") == "true" {
				switch req.URL.Path {
				case "/api/v1/configmaps":
					once.Do(func() { close(generatedWatched) })
				case "/api/v1/namespaces":
					select {
					case <-generatedWatched:
					case <-req.Context().Done():
						return nil, req.Context().Err()
					}
				}
			}
			return rt.RoundTrip(req)
		})
	})
	runUntilSynced(t, held, "GeneratingPolicy/early")
}

// A policy delivered while the records are still being read has its
// triggers listed meanwhile: resolving them and listing them needs no
// record, and its first sync waits for the list. Here the records' list is
// held until its triggers (Namespaces) are asked for, for 10 s at most.
func TestTriggersAreListedWhileTheRecordsAreRead(t *testing.T) {
	applyColorPolicy(t, "ahead", "ahead", nil)
	createNamespace(t, "ahead-red", map[string]string{"color": "ahead"})

	triggersAsked := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	held, heldFor := false, time.Duration(0)
	watched := rest.CopyConfig(cfg)
	watched.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			switch {
			case req.URL.Path == "/api/v1/namespaces":
				once.Do(func() { close(triggersAsked) })
			case strings.HasSuffix(req.URL.Path, "/policyinventories") && req.Method == http.MethodGet:
				mu.Lock()
				first := !held
				held = true
				mu.Unlock()
				if first {
					began := time.Now()
					select {
					case <-triggersAsked:
					case <-time.After(10 * time.Second):
					case <-req.Context().Done():
					}
					mu.Lock()
					heldFor = time.Since(began)
					mu.Unlock()
				}
			}
			return rt.RoundTrip(req)
		})
	})
	runControllerOn(t, watched, nil)
	poll(t, "ConfigMap in ahead-red", func(ctx context.Context) (bool, error) {
		cm, err := getConfigMap(ctx, "ahead-red", "zk-kafka-address")
		return cm != nil, err
	})
	select {
	case <-triggersAsked:
	default:
		t.Fatal("the triggers were never asked for")
	}
	mu.Lock()
	defer mu.Unlock()
	if heldFor >= 10*time.Second {
		t.Errorf("the triggers were asked for only once the records were read (held %s)", heldFor)
	}
}

// A controller asks discovery once: its writes map kinds to resources with
// the discovery its start asked for, not with a discovery of their own,
// which the first create waited for.
func TestWritesMapKindsWithTheControllersDiscovery(t *testing.T) {
	var mu sync.Mutex
	var discovered []string
	counted := rest.CopyConfig(cfg)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && (req.URL.Path == "/api" || req.URL.Path == "/apis" || req.URL.Path == "/api/v1") {
				mu.Lock()
				discovered = append(discovered, req.URL.Path)
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	applyColorPolicy(t, "one-discovery", "one-discovery", nil)
	createNamespace(t, "one-discovery-a", map[string]string{"color": "one-discovery"})
	runControllerOn(t, counted, nil)
	poll(t, "ConfigMap in one-discovery-a", func(ctx context.Context) (bool, error) {
		cm, err := getConfigMap(ctx, "one-discovery-a", "zk-kafka-address")
		return cm != nil, err
	})

	mu.Lock()
	defer mu.Unlock()
	if want := []string{"/api", "/apis"}; !slices.Equal(discovered, want) {
		t.Errorf("discovery asked for %q, want %q once", discovered, want)
	}
}
