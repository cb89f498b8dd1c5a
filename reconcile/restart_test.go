package reconcile_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/internal/syncbuf"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/reconcile/ledger"
)

// writeCounter counts the requests that are not reads (GET, LIST and WATCH
// are all GET), dry runs included. Access reviews are questions, stored
// nowhere: they are not counted.
type writeCounter struct {
	next   http.RoundTripper
	writes atomic.Int64
	mu     sync.Mutex
	seen   []string
}

func (w *writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && !strings.HasPrefix(req.URL.Path, "/apis/authorization.k8s.io/") {
		w.writes.Add(1)
		w.mu.Lock()
		seen := req.Method + " " + controlplane.ObjectPath(req)
		if req.Method == http.MethodPatch {
			seen += " (" + req.Header.Get("Content-Type") + ")"
		}
		if req.URL.Query().Has("dryRun") {
			seen += " (dry run)"
		}
		w.seen = append(w.seen, seen)
		w.mu.Unlock()
	}
	return w.next.RoundTrip(req)
}

// countingWrites returns a copy of config whose requests counter counts.
func countingWrites(config *rest.Config) (*rest.Config, *writeCounter) {
	counted := rest.CopyConfig(config)
	counter := &writeCounter{}
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		counter.next = rt
		return counter
	})
	return counted, counter
}

// runCounting starts a controller (options changed by edit) whose writes
// are counted and which counts the error-free syncs of policy; stop ends it
// and waits for it.
func runCounting(t *testing.T, policy string, edit func(*reconcile.Options)) (counter *writeCounter, syncs *atomic.Int64, stop func()) {
	counter, syncs, _, stop = runCountingController(t, policy, edit)
	return counter, syncs, stop
}

// runCountingController is runCounting, with the controller.
func runCountingController(t *testing.T, policy string, edit func(*reconcile.Options)) (counter *writeCounter, syncs *atomic.Int64, c *reconcile.Controller, stop func()) {
	t.Helper()
	counted, counter := countingWrites(cfg)
	syncs = &atomic.Int64{}
	opts := reconcile.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	if edit != nil {
		edit(&opts)
	}
	opts.OnSync = func(p string, err error) {
		if p == policy && err == nil {
			syncs.Add(1)
		}
	}
	c, stopController := launchController(t, counted, opts)
	return counter, syncs, c, func() {
		t.Helper()
		if err := stopController(); err != nil {
			t.Fatal(err)
		}
	}
}

// about returns the writes whose path contains s (a test's namespace and
// policy names): a controller also finishes what earlier tests left, such
// as the clean-up of a policy deleted after their controller stopped.
func (w *writeCounter) about(s string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, seen := range w.seen {
		if strings.Contains(seen, s) {
			out = append(out, seen)
		}
	}
	return out
}

// runUntilSynced runs a controller on config until every named policy has
// synced once without error, then stops it.
func runUntilSynced(t *testing.T, config *rest.Config, policies ...string) {
	t.Helper()
	runUntilSyncedWith(t, config, nil, policies...)
}

// runUntilSyncedWith is runUntilSynced with options changed by edit.
func runUntilSyncedWith(t *testing.T, config *rest.Config, edit func(*reconcile.Options), policies ...string) {
	t.Helper()
	synced := make(chan string, 100)
	opts := reconcile.DefaultOptions()
	// Kept in memory, shown if the test fails: a failure that needs the
	// timing of a CI run is told by its own log.
	logs := &syncbuf.Buffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the log of a controller run until %v synced:\n%s", policies, logs.String())
		}
	})
	if edit != nil {
		edit(&opts)
	}
	opts.OnSync = func(policy string, err error) {
		if err == nil {
			synced <- policy
		}
	}
	_, stop := launchController(t, config, opts)
	waiting := map[string]bool{}
	for _, p := range policies {
		waiting[p] = true
	}
	poll(t, "every policy to sync", func(context.Context) (bool, error) {
		for {
			select {
			case p := <-synced:
				delete(waiting, p)
			default:
				return len(waiting) == 0, nil
			}
		}
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRestartWithNothingChangedWritesNothing: a controller that starts on a
// cluster it has already reconciled sends no write request at all.
func TestRestartWithNothingChangedWritesNothing(t *testing.T) {
	tb := newTable(t, "restart")
	tb.applyPolicy(derivedPolicy("restart-sync", "restart", "out", "one", true, false))
	tb.applyPolicy(derivedPolicy("restart-nosync", "restart", "copy", "one", false, false))
	t.Cleanup(func() {
		tb.deletePolicy("restart-sync")
		tb.deletePolicy("restart-nosync")
	})
	tb.trigger("a", "restart", "a1")
	tb.trigger("b", "restart", "b1")

	runUntilSynced(t, cfg, "GeneratingPolicy/restart-sync", "GeneratingPolicy/restart-nosync")
	for _, name := range []string{"a-out", "b-out", "a-copy", "b-copy"} {
		if tb.get(name) == nil {
			t.Fatalf("%s was not generated", name)
		}
	}

	counted, counter := countingWrites(cfg)
	runUntilSynced(t, counted, "GeneratingPolicy/restart-sync", "GeneratingPolicy/restart-nosync")
	if w := counter.about("restart"); len(w) != 0 {
		t.Errorf("restart with nothing changed made %d write requests: %v", len(w), w)
	}
}

// TestWhatHappensWhileStoppedIsRepairedAtStart: the record carries what
// Sprout must remember, so changes made while it was stopped are handled
// as if it had seen them.
func TestWhatHappensWhileStoppedIsRepairedAtStart(t *testing.T) {
	tb := newTable(t, "stopped")
	tb.applyPolicy(derivedPolicy("stopped-sync", "stopped", "out", "one", true, false))
	tb.applyPolicy(derivedPolicy("stopped-nosync", "stopped", "copy", "one", false, false))
	t.Cleanup(func() { tb.deletePolicy("stopped-nosync") })
	tb.trigger("a", "stopped", "a1")
	tb.trigger("b", "stopped", "b1")
	runUntilSynced(t, cfg, "GeneratingPolicy/stopped-sync", "GeneratingPolicy/stopped-nosync")
	for _, name := range []string{"a-out", "b-out", "a-copy", "b-copy"} {
		if tb.get(name) == nil {
			t.Fatalf("%s was not generated", name)
		}
	}
	rec, err := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories).Get(context.Background(), "gpol.stopped-nosync", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the record of the policy: %v", err)
	}
	if generated, _, _ := unstructured.NestedStringSlice(rec.Object, "spec", "generated"); len(generated) != 2 {
		t.Errorf("record remembers %v as generated, want 2 objects", generated)
	}

	// While stopped: a trigger goes, a user deletes a downstream of the
	// non-synchronizing policy, and the synchronizing policy is deleted.
	tb.delete("b")
	tb.delete("a-copy")
	runUntilSynced(t, cfg, "GeneratingPolicy/stopped-sync", "GeneratingPolicy/stopped-nosync")
	if tb.get("b-out") != nil {
		t.Error("the downstream of a trigger deleted while stopped was not pruned")
	}
	if tb.get("a-out") == nil {
		t.Error("the downstream of a remaining trigger was pruned")
	}
	if tb.get("a-copy") != nil {
		t.Error("a downstream the user deleted was generated again after a restart")
	}

	tb.deletePolicy("stopped-sync")
	runUntilSynced(t, cfg, "GeneratingPolicy/stopped-sync", "GeneratingPolicy/stopped-nosync")
	if tb.get("a-out") != nil {
		t.Error("the data downstream of a policy deleted while stopped was kept")
	}
	_, err = dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories).Get(context.Background(), "gpol.stopped-sync", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the record of the deleted policy: %v, want NotFound", err)
	}
}

// crashAfter cancels a controller's context as soon as it has sent the
// first real (not dry-run) write whose path contains target: the controller
// dies between an apply and everything that follows it, records included.
type crashAfter struct {
	next   http.RoundTripper
	target string
	cancel context.CancelFunc
	once   sync.Once
}

func (c *crashAfter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if req.Method != http.MethodGet && strings.Contains(req.URL.Path, c.target) && !req.URL.Query().Has("dryRun") {
		c.once.Do(c.cancel)
	}
	return resp, err
}

// TestCrashAfterApplyLeavesNothingUnfound: a controller killed right after
// writing a downstream leaves an object that the next one finds (labels and
// the record's write-ahead resource list) and prunes when its trigger goes.
func TestCrashAfterApplyLeavesNothingUnfound(t *testing.T) {
	tb := newTable(t, "crash")
	tb.applyPolicy(derivedPolicy("crash", "crash", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("crash") })
	tb.trigger("a", "crash", "a1")

	ctx, cancel := context.WithCancel(context.Background())
	crashing := rest.CopyConfig(cfg)
	// Sprout's only writes there are of a-out: a create (to the collection), or an apply.
	crash := &crashAfter{target: "/namespaces/crash/configmaps", cancel: cancel}
	crashing.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		crash.next = rt
		return crash
	})
	opts := reconcile.DefaultOptions()
	opts.Logger, opts.ProofKey = slog.New(slog.DiscardHandler), testProofKey
	c, err := reconcile.New(crashing, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	cm := tb.get("a-out")
	if cm == nil {
		t.Fatal("the controller died before its apply: the test proves nothing")
	}
	if cm.Labels["generate.kyverno.io/policy-name"] != "crash" {
		t.Errorf("the object written before the crash is not labelled: %v", cm.Labels)
	}

	tb.delete("a")
	runUntilSynced(t, cfg, "GeneratingPolicy/crash")
	if tb.get("a-out") != nil {
		t.Error("the object written just before a crash was not found and pruned after the restart")
	}
}

// TestLargeRecordsAreSharded: a record whose lists outgrow one object is
// spread over shards, read back whole after a restart, and shrinks back.
func TestLargeRecordsAreSharded(t *testing.T) {
	tb := newTable(t, "shards")
	tb.applyPolicy(derivedPolicy("sharded", "shards", "copy", "one", false, false))
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		tb.trigger(name, "shards", name)
	}
	small := func(o *reconcile.Options) { o.RecordShardSize = 2 }
	runUntilSyncedWith(t, cfg, small, "GeneratingPolicy/sharded")
	records := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories)
	main, err := records.Get(context.Background(), "gpol.sharded", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	shards, _, _ := unstructured.NestedInt64(main.Object, "spec", "shards")
	if shards < 2 {
		t.Fatalf("5 generated entries with 2 per record: %d shards", shards)
	}
	total := 0
	for i := range shards {
		shard, err := records.Get(context.Background(), fmt.Sprintf("gpol.sharded.%d-%d", shards, i), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
		generated, _, _ := unstructured.NestedStringSlice(shard.Object, "spec", "generated")
		total += len(generated)
	}
	if total != 5 {
		t.Errorf("shards hold %d generated entries, want 5", total)
	}

	// A restart reads the shards back: a deleted downstream stays deleted,
	// and nothing is written.
	tb.delete("c-copy")
	counted, counter := countingWrites(cfg)
	runUntilSyncedWith(t, counted, small, "GeneratingPolicy/sharded")
	if tb.get("c-copy") != nil {
		t.Error("a downstream the user deleted was generated again: the shards were not read")
	}
	if n := counter.writes.Load(); n != 0 {
		t.Errorf("restart wrote %d times: %v", n, counter.seen)
	}

	// Deleting the policy deletes the record and every shard.
	tb.deletePolicy("sharded")
	runUntilSyncedWith(t, cfg, small, "GeneratingPolicy/sharded")
	list, err := records.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Items {
		if strings.HasPrefix(r.GetName(), "gpol.sharded") {
			t.Errorf("record %s outlived its policy", r.GetName())
		}
	}
}

// TestTriggerRecreatedUnderItsName: a downstream whose trigger was deleted
// and created again (a new UID) is taken over by the new trigger, not
// reported as someone else's forever.
func TestTriggerRecreatedUnderItsName(t *testing.T) {
	tb, trigger := recreatedWhileStopped(t, "recreated")
	runUntilSynced(t, cfg, "GeneratingPolicy/recreated")
	after := tb.get("a-out")
	if after == nil {
		t.Fatal("the downstream is gone after the trigger was created again")
	}
	if after.Labels["generate.kyverno.io/trigger-uid"] != string(trigger.UID) || after.Data["from"] != "v2" {
		t.Errorf("the downstream was not taken over by the new trigger: %v %v", after.Labels, after.Data)
	}
	c, err := policyCondition(context.Background(), "recreated")
	if err != nil || c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("policy not Ready: %+v %v", c, err)
	}
}

// TestRecreatedTriggerTakesOverBeforeItsList: after a restart, a trigger
// deleted and created again while Sprout was stopped is written for first,
// before the list of triggers comes (a watch from the record finds it). Its
// predecessor's downstream is taken over only once that list tells the old
// trigger gone: the list is held until that watch begins, and the takeover
// waits for it rather than reporting the downstream as someone else's.
func TestRecreatedTriggerTakesOverBeforeItsList(t *testing.T) {
	const name = "recreated-early"
	tb := newTable(t, name)
	tb.applyPolicy(derivedPolicy(name, name, "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy(name) })
	tb.trigger("a", name, "v1")
	_, stop := launchController(t, cfg, reconcile.DefaultOptions())
	tb.waitFor("the downstream", "a-out", exists)
	poll(t, "the policy's record", func(ctx context.Context) (bool, error) {
		rec, err := recordOf(ctx, "gpol."+name)
		return rec != nil && rec.Labels[ledger.LabelRebuilding] == "", err
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	tb.delete("a")
	tb.trigger("a", name, "v2")
	trigger := tb.get("a")

	released := make(chan struct{})
	release := sync.OnceFunc(func() { close(released) })
	t.Cleanup(release)
	held := rest.CopyConfig(cfg)
	held.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			switch {
			case req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/configmaps") && q.Get("labelSelector") == "app="+name &&
				(q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true"):
				select {
				case <-released:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			case req.Method == http.MethodGet && q.Get("labelSelector") == "app="+name && q.Get("watch") == "true" && q.Get("resourceVersion") != "":
				release() // the watch from the record has begun: the list comes now
			}
			return rt.RoundTrip(req)
		})
	})
	runUntilSynced(t, held, "GeneratingPolicy/"+name)
	switch after := tb.get("a-out"); {
	case after == nil:
		t.Error("the downstream is gone after its trigger was created again")
	case after.Labels["generate.kyverno.io/trigger-uid"] != string(trigger.UID) || after.Data["from"] != "v2":
		t.Errorf("the downstream was not taken over by the trigger created again: %v %v", after.Labels, after.Data)
	}
}

// TestTakenOverDownstreamOutlivesItsOwnUpdate: the downstream a recreated
// trigger took over changes hands in the cache too, and that update syncs
// the policy again, the old trigger's UID among those it looks at. That
// sync keeps the downstream: the old trigger claimed it, the new one wants
// it.
func TestTakenOverDownstreamOutlivesItsOwnUpdate(t *testing.T) {
	tb, trigger := recreatedWhileStopped(t, "taken-over")
	_, c := runController(t, nil)
	poll(t, "the downstream taken over (or gone), its last version cached, the controller idle", func(ctx context.Context) (bool, error) {
		out, err := tb.kube.CoreV1().ConfigMaps("taken-over").Get(ctx, "a-out", metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return c.Idle(), nil
		case err != nil:
			return false, err
		case out.Labels["generate.kyverno.io/trigger-uid"] != string(trigger.UID):
			return false, nil
		}
		for _, v := range c.CachedVersions(corev1.SchemeGroupVersion.WithResource("configmaps"), "taken-over")["a-out"] {
			if v != out.ResourceVersion {
				return false, nil
			}
		}
		return c.Idle(), nil
	})
	if tb.get("a-out") == nil {
		t.Fatal("the downstream taken over by the recreated trigger was pruned by a sync that followed")
	}
}

// recreatedWhileStopped runs a synchronizing policy named name, labelled
// app=name in Namespace name, until it generated a-out for trigger a, then,
// with no controller running, deletes a and creates it again (v2, a new
// UID), which it returns.
func recreatedWhileStopped(t *testing.T, name string) (*table, *corev1.ConfigMap) {
	t.Helper()
	tb := newTable(t, name)
	tb.applyPolicy(derivedPolicy(name, name, "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy(name) })
	tb.trigger("a", name, "v1")
	runUntilSynced(t, cfg, "GeneratingPolicy/"+name)
	if tb.get("a-out") == nil {
		t.Fatal("no downstream")
	}
	tb.delete("a")
	tb.trigger("a", name, "v2")
	trigger, err := tb.kube.CoreV1().ConfigMaps(name).Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tb, trigger
}

// TestResyncWithNothingChangedWritesNothing: scheduled full recomputes run
// every policy again and write nothing when nothing drifted.
func TestResyncWithNothingChangedWritesNothing(t *testing.T) {
	tb := newTable(t, "resync")
	tb.applyPolicy(derivedPolicy("resync", "resync", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("resync") })
	tb.trigger("a", "resync", "a1")
	runUntilSynced(t, cfg, "GeneratingPolicy/resync")

	counter, syncs, stop := runCounting(t, "GeneratingPolicy/resync", func(o *reconcile.Options) { o.ResyncSchedule = "@every 1s" })
	poll(t, "two resyncs after the first sync", func(context.Context) (bool, error) { return syncs.Load() >= 3, nil })
	stop()
	if w := counter.about("resync"); len(w) != 0 {
		t.Errorf("resyncs with nothing changed made %d write requests: %v", len(w), w)
	}
}

// TestRecomputeRepairsDriftMadeWhileStopped: drift no event reported (edits
// and deletes while the controller was stopped) is repaired by the full
// recompute that starts it, with one write per drifted object and none for
// the objects still right.
func TestRecomputeRepairsDriftMadeWhileStopped(t *testing.T) {
	tb := newTable(t, "drift")
	tb.applyPolicy(derivedPolicy("drift", "drift", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("drift") })
	for _, name := range []string{"a", "b", "c"} {
		tb.trigger(name, "drift", name+"1")
	}
	runUntilSynced(t, cfg, "GeneratingPolicy/drift")

	tb.edit("a-out", "policy", "edited while stopped")
	tb.delete("b-out")

	counted, counter := countingWrites(cfg)
	runUntilSynced(t, counted, "GeneratingPolicy/drift")
	if cm := tb.get("a-out"); cm == nil || cm.Data["policy"] != "one" {
		t.Errorf("the edit made while stopped was not reverted: %v", cm)
	}
	if tb.get("b-out") == nil {
		t.Error("the downstream deleted while stopped was not recreated")
	}
	var writes []string
	counter.mu.Lock()
	for _, w := range counter.seen {
		if strings.Contains(w, "/namespaces/drift/configmaps/") && !strings.HasSuffix(w, "(dry run)") {
			writes = append(writes, w)
		}
	}
	counter.mu.Unlock()
	// a-out was created, not applied: putting it back applies the state
	// created, which drops no field, so its create's fields are not handed
	// over first (no JSON patch).
	want := []string{
		"PATCH /api/v1/namespaces/drift/configmaps/a-out (application/apply-patch+yaml)",
		"POST /api/v1/namespaces/drift/configmaps/b-out",
	}
	slices.Sort(writes)
	if !slices.Equal(writes, want) {
		t.Errorf("writes (besides dry runs):\n%s\nwant:\n%s", strings.Join(writes, "\n"), strings.Join(want, "\n"))
	}
}

// TestAdmissionsOutliveTheSettingsThatGaveThem: triggers admitted by
// generateExisting or by their creation are not listed in the record (it
// stays small), yet when the policy drops both settings while Sprout is
// stopped, they stay admitted: the next sync lists them before anything
// else, as a trigger stays admitted while it exists.
func TestAdmissionsOutliveTheSettingsThatGaveThem(t *testing.T) {
	tb := newTable(t, "admits")
	tb.trigger("a", "admits", "a1") // exists before the policy
	waitForNextSecond(t, tb.get("a").CreationTimestamp.Time)
	doc := derivedPolicy("admits", "admits", "out", "one", true, false)
	tb.applyPolicy(generatingExisting(doc))
	t.Cleanup(func() { tb.deletePolicy("admits") })
	tb.trigger("b", "admits", "b1") // created after it

	records := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories)
	record := func() (admitted []string, derived map[string]any) {
		t.Helper()
		rec, err := records.Get(context.Background(), "gpol.admits", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		admitted, _, _ = unstructured.NestedStringSlice(rec.Object, "spec", "admitted")
		derived, _, _ = unstructured.NestedMap(rec.Object, "spec", "derived")
		return admitted, derived
	}
	runUntilSynced(t, cfg, "GeneratingPolicy/admits")
	for _, name := range []string{"a-out", "b-out"} {
		if tb.get(name) == nil {
			t.Fatalf("%s was not generated", name)
		}
	}
	admitted, derived := record()
	if len(admitted) != 0 || derived["generateExisting"] != true || derived["created"] != true {
		t.Fatalf("record lists %v as admitted, derives by %v: want none listed, derived by generateExisting and creation", admitted, derived)
	}

	// While stopped, the policy loses both: only an UPDATE admits now.
	tb.applyPolicy(replaceOnce(t, doc, `operations: ["CREATE", "UPDATE"]`, `operations: ["UPDATE"]`))
	runUntilSynced(t, cfg, "GeneratingPolicy/admits")
	for _, name := range []string{"a-out", "b-out"} {
		if tb.get(name) == nil {
			t.Errorf("%s was pruned when the settings that admitted its trigger changed", name)
		}
	}
	admitted, derived = record()
	want := []string{string(tb.get("a").UID), string(tb.get("b").UID)}
	slices.Sort(want)
	if !slices.Equal(admitted, want) || derived["generateExisting"] != false || derived["created"] != false {
		t.Errorf("record lists %v as admitted, derives by %v: want %v listed, nothing derived", admitted, derived, want)
	}

	// A trigger created now is not admitted, and the listed ones stay so
	// after another restart.
	tb.trigger("c", "admits", "c1")
	runUntilSynced(t, cfg, "GeneratingPolicy/admits")
	if tb.get("c-out") != nil {
		t.Error("a trigger created after CREATE was dropped from the rules was admitted")
	}
	for _, name := range []string{"a-out", "b-out"} {
		if tb.get(name) == nil {
			t.Errorf("%s was pruned after a restart", name)
		}
	}
}
