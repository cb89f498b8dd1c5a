package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/sources"
)

// fakeCore is the core a Teller tells for: the policies running, what was
// told of each, and the record status writes.
type fakeCore struct {
	mu       sync.Mutex
	policies map[policy.Key]*policy.Compiled
	told     map[policy.Key]*Told
	records  map[policy.Key]*sproutv1alpha1.PolicyInventory
	saved    int
}

func (f *fakeCore) run(cp *policy.Compiled) policy.Key {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := policy.KeyOf(cp.Policy)
	f.policies[key] = cp
	if f.told[key] == nil {
		f.told[key] = &Told{}
	}
	return key
}

func (f *fakeCore) core() TellerCore {
	return TellerCore{
		Policy: func(key policy.Key) *policy.Compiled {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.policies[key]
		},
		Told: func(key policy.Key) *Told {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.told[key]
		},
		Record: func(key policy.Key) *sproutv1alpha1.PolicyInventory { return f.records[key] },
		SaveRecordStatus: func(context.Context, policy.Key, *policy.Compiled, Outcome) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.saved++
			return nil
		},
	}
}

// newTestTeller returns a Teller over a fake core and fake clients, its
// Events kept by a FakeRecorder, and the status patches the API server got.
func newTestTeller(t *testing.T, triggerEvents bool) (*Teller, *fakeCore, *record.FakeRecorder, *[]string) {
	t.Helper()
	f := &fakeCore{policies: map[policy.Key]*policy.Compiled{}, told: map[policy.Key]*Told{}, records: map[policy.Key]*sproutv1alpha1.PolicyInventory{}}
	client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	var mu sync.Mutex
	var patches []string
	version := 10
	client.PrependReactor("patch", "generatingpolicies", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		mu.Lock()
		defer mu.Unlock()
		patches = append(patches, p.GetSubresource()+" "+string(p.GetPatch()))
		version++
		var body map[string]any
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			return true, nil, err
		}
		out := &unstructured.Unstructured{Object: map[string]any{"status": body["status"]}}
		out.SetName(p.GetName())
		out.SetResourceVersion(strconv.Itoa(version))
		return true, out, nil
	})
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := NewTeller(TellerOptions{Core: f.core(), Client: client, EventSink: kubefake.NewClientset().CoreV1().Events(""),
		TriggerEvents: triggerEvents, Metrics: m, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(100)
	tl.events = rec
	return tl, f, rec, &patches
}

func clusterPolicy(name string, generation int64, version string) *policy.Compiled {
	p := &apiv1.GeneratingPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiv1.GroupVersion.String(), Kind: apiv1.GeneratingPolicyKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), Generation: generation, ResourceVersion: version},
	}
	return &policy.Compiled{Policy: p, Source: sources.ClusterSourceName}
}

// waitIdle waits until every outcome handed over is written.
func waitIdle(t *testing.T, tl *Teller) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !tl.Idle() {
		if time.Now().After(deadline) {
			t.Fatal("outcomes not written")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStatusWrittenOnceAndComparedWithTheWrite: an outcome handed over is
// written to the policy's status and its record's; handed over again
// before the cache has seen the write, it is compared with what the write
// returned, and nothing is written.
func TestStatusWrittenOnceAndComparedWithTheWrite(t *testing.T) {
	tl, f, _, patches := newTestTeller(t, false)
	cp := clusterPolicy("p", 1, "5")
	key := f.run(cp)
	stop := tl.StartStatusWorkers(t.Context())
	defer stop()

	tl.Later(key, cp, Outcome{Triggers: 1, Objects: 2})
	waitIdle(t, tl)
	if len(*patches) != 1 || !strings.HasPrefix((*patches)[0], "status ") {
		t.Fatalf("status patches: %q, want one", *patches)
	}
	tl.Later(key, cp, Outcome{Triggers: 1, Objects: 2})
	waitIdle(t, tl)
	if len(*patches) != 1 {
		t.Errorf("the same outcome was written again: %q", *patches)
	}
	if f.saved != 2 {
		t.Errorf("record status written %d times, want 2 (the record's store compares)", f.saved)
	}
}

// TestOutcomeOfAPolicyGoneIsNotWritten: the outcome of a policy deleted
// before a worker took it has nowhere to go, and is dropped.
func TestOutcomeOfAPolicyGoneIsNotWritten(t *testing.T) {
	tl, f, _, patches := newTestTeller(t, false)
	cp := clusterPolicy("p", 1, "5")
	key := f.run(cp)
	tl.Later(key, cp, Outcome{Triggers: 1})
	f.mu.Lock()
	delete(f.policies, key)
	f.mu.Unlock()
	tl.StartStatusWorkers(t.Context())()
	if len(*patches) != 0 || f.saved != 0 || tl.Pending() != 0 {
		t.Errorf("a deleted policy's outcome: %d patches, %d record writes, %d pending", len(*patches), f.saved, tl.Pending())
	}
}

// TestStoppingWritesWhatIsPending: outcomes still waiting when the workers
// stop (one delayed for its counts, say) are written before stop returns.
func TestStoppingWritesWhatIsPending(t *testing.T) {
	tl, f, _, patches := newTestTeller(t, false)
	cp := clusterPolicy("p", 1, "5")
	key := f.run(cp)
	stop := tl.StartStatusWorkers(t.Context())
	tl.Later(key, cp, Outcome{Triggers: 1})
	waitIdle(t, tl)
	tl.Later(key, cp, Outcome{Triggers: 2}) // only counts: delayed
	stop()
	if len(*patches) != 2 {
		t.Errorf("status patches %q, want the delayed one written at stop", *patches)
	}
}

// TestProgressingOncePerGeneration: a sync of a generation the status does
// not describe marks it Reconciling once, and never in place of an
// outcome not yet written.
func TestProgressingOncePerGeneration(t *testing.T) {
	tl, f, _, _ := newTestTeller(t, false)
	cp := clusterPolicy("p", 2, "5")
	key := f.run(cp)
	tl.Progressing(key, cp)
	if p, ok := tl.pending.take(key); !ok || p.out.Reason != ReasonProgressing {
		t.Fatalf("pending after a new generation began: %+v, %v", p.out, ok)
	}
	tl.pending.written()
	tl.Progressing(key, cp)
	if tl.Pending() != 0 {
		t.Error("a generation marked Reconciling twice")
	}
	next := clusterPolicy("p", 3, "6")
	tl.Later(key, next, Outcome{Triggers: 1})
	tl.Progressing(key, next)
	if p, _ := tl.pending.take(key); p.out.Reason == ReasonProgressing {
		t.Error("Reconciling replaced an outcome not yet written")
	}
}

// TestFailureToldOnce: a failure is told in an Event when it is new, not
// at each retry that fails alike; once the policy recovers, it is told
// again. What a sync wrote and pruned is told each time.
func TestFailureToldOnce(t *testing.T) {
	tl, f, rec, _ := newTestTeller(t, false)
	cp := clusterPolicy("p", 1, "5")
	key := f.run(cp)
	failed := Outcome{Reason: ReasonApplyFailed, Err: errors.New("forbidden")}
	tl.Events(key, cp, nil, failed, inventory.ChangeSet{}, nil)
	tl.Events(key, cp, nil, failed, inventory.ChangeSet{}, nil)
	tl.Events(key, cp, nil, Outcome{}, inventory.ChangeSet{Changes: []inventory.Change{
		{ID: "ConfigMap/a/x", Action: inventory.Created}, {ID: "ConfigMap/a/y", Action: inventory.Deleted}}}, nil)
	tl.Events(key, cp, nil, failed, inventory.ChangeSet{}, nil)
	want := []string{
		"Warning ApplyFailed forbidden",
		"Normal Generated created 1: ConfigMap/a/x",
		"Normal Pruned deleted 1: ConfigMap/a/y",
		"Warning ApplyFailed forbidden",
	}
	if got := drain(rec); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFailureShownBeforeARestartIsNotToldAgain: after a restart, the
// failure the Ready condition already shows is not told again.
func TestFailureShownBeforeARestartIsNotToldAgain(t *testing.T) {
	tl, f, rec, _ := newTestTeller(t, false)
	cp := clusterPolicy("p", 1, "5")
	key := f.run(cp)
	before := &metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonApplyFailed, Message: "forbidden"}
	tl.Events(key, cp, before, Outcome{Reason: ReasonApplyFailed, Err: errors.New("forbidden")}, inventory.ChangeSet{}, nil)
	if got := drain(rec); len(got) != 0 {
		t.Errorf("a failure the condition showed was told again: %q", got)
	}
}

// TestConflictToldOnceToTheOwner: the owner of an object another policy
// also generates hears of it once.
func TestConflictToldOnceToTheOwner(t *testing.T) {
	tl, f, rec, _ := newTestTeller(t, false)
	owner, other := clusterPolicy("owner", 1, "5"), clusterPolicy("other", 1, "5")
	ownerKey, otherKey := f.run(owner), f.run(other)
	changes := inventory.ChangeSet{Changes: []inventory.Change{{ID: "ConfigMap/a/x", Owner: ownerKey.String()}}}
	tl.Events(otherKey, other, nil, Outcome{}, changes, nil)
	tl.Events(otherKey, other, nil, Outcome{}, changes, nil)
	got := drain(rec)
	if len(got) != 1 || !strings.HasPrefix(got[0], "Warning PolicyConflict ConfigMap/a/x is also generated by "+otherKey.String()) {
		t.Errorf("conflict events: %q", got)
	}
}

// TestTriggersHearWhatWasGeneratedForThem: with trigger Events on, each
// trigger is told what was generated for it; a deleted one is not.
func TestTriggersHearWhatWasGeneratedForThem(t *testing.T) {
	tl, f, rec, _ := newTestTeller(t, true)
	cp := clusterPolicy("p", 1, "5")
	key := f.run(cp)
	trigger := func(uid string, deleted bool) policy.Trigger {
		return policy.Trigger{Object: cached(t, uid), Deleted: deleted}
	}
	changes := inventory.ChangeSet{Changes: []inventory.Change{
		{ID: "Secret/a/x", Action: inventory.Created, TriggerUID: "t1"},
		{ID: "Secret/a/y", Action: inventory.Created, TriggerUID: "t2"}}}
	tl.Events(key, cp, nil, Outcome{}, changes, []policy.Trigger{trigger("t1", false), trigger("t2", true)})
	got := drain(rec)
	if len(got) != 2 || got[1] != "Normal Generated GeneratingPolicy/p: created 1: Secret/a/x" {
		t.Errorf("events: %q", got)
	}
}

// TestPolicyFromFilesToldOnItsRecord: a policy from files has its Events
// on its record, and none before it has one.
func TestPolicyFromFilesToldOnItsRecord(t *testing.T) {
	tl, f, _, _ := newTestTeller(t, false)
	cp := clusterPolicy("p", 1, "5")
	cp.Source = "git"
	key := f.run(cp)
	if ref := tl.Reference(key, cp); ref != nil {
		t.Errorf("a policy without a record has its Events on %v", ref)
	}
	f.records[key] = &sproutv1alpha1.PolicyInventory{ObjectMeta: metav1.ObjectMeta{Name: "rec", UID: "rec-uid"}}
	if ref := tl.Reference(key, cp); ref == nil || ref.Kind != sproutv1alpha1.PolicyInventoryKind || ref.Name != "rec" {
		t.Errorf("Events on %v, want the record", ref)
	}
}

// TestToldOfAPolicyGoneKeepsNothing: a nil Told, of a policy that no
// longer runs, keeps nothing and answers the zero value: nothing is new
// to tell of it.
func TestToldOfAPolicyGoneKeepsNothing(t *testing.T) {
	var told *Told
	told.Granted(&Verdict{})
	told.tell("x")
	told.statusWritten(&unstructured.Unstructured{Object: map[string]any{"status": map[string]any{}}})
	if told.Reported() != nil || told.lastTold() != nil || told.fail("f") != nil || told.writtenStatus("1") != nil ||
		told.firstConflict("c") || told.Progress(1) {
		t.Error("a nil Told kept something")
	}
}

// TestReportsOffWriteNothing: without a PolicyReports writer every
// hand-off is a no-op.
func TestReportsOffWriteNothing(t *testing.T) {
	tl, _, _, _ := newTestTeller(t, false)
	cp := clusterPolicy("p", 1, "5")
	tr := policy.Trigger{Object: cached(t, "t")}
	tl.RunReports(t.Context())
	tl.Trigger(cp, tr, policy.Evaluation{}, nil)
	tl.ApplyFailed(cp, []policy.Trigger{tr}, map[string]error{"": errors.New("x")})
	tl.UnreportUnmatched(cp, nil, nil)
	tl.UnreportDirty(cp, []types.UID{"u"}, nil)
	tl.UnreportPolicy(policy.KeyOf(cp.Policy))
	tl.TriggerGone(tr.Object, true, []*policy.Compiled{cp})
	tl.TriggerGone(tr.Object, false, nil)
}

// TestDescribeChanges names a few objects, sorted, and counts the rest.
func TestDescribeChanges(t *testing.T) {
	var chs []inventory.Change
	for _, id := range []string{"g", "f", "e", "d", "c", "b", "a"} {
		chs = append(chs, inventory.Change{ID: "ConfigMap/ns/" + id, Action: inventory.Created})
	}
	chs[0].Action = inventory.Configured
	chs = append(chs, inventory.Change{ID: "ConfigMap/ns/0", Action: inventory.Deleted}, inventory.Change{ID: "ConfigMap/ns/f", Action: inventory.Created})
	want := "created 7, configured 1: ConfigMap/ns/a, ConfigMap/ns/b, ConfigMap/ns/c, ConfigMap/ns/d, ConfigMap/ns/e and 3 more"
	if got, n := describeChanges(chs, inventory.Created, inventory.Configured); got != want || n != 8 {
		t.Errorf("got %q, %d\nwant %q, 8", got, n, want)
	}
	if got, n := describeChanges(chs, inventory.Deleted); got != "deleted 1: ConfigMap/ns/0" || n != 1 {
		t.Errorf("the deleted: got %q, %d", got, n)
	}
	if got, n := describeChanges(chs[:2], inventory.Deleted); got != "" || n != 0 {
		t.Errorf("none deleted: got %q, %d", got, n)
	}
}

// BenchmarkDescribeChanges describes the first sync of a policy over
// 100,000 triggers: a change for each object it created.
func BenchmarkDescribeChanges(b *testing.B) {
	chs := make([]inventory.Change, 100000)
	for i := range chs {
		chs[i] = inventory.Change{ID: fmt.Sprintf("ConfigMap/ns-%d/cm-%d-out", i%10, (i*7919)%100000), Action: inventory.Created}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, n := describeChanges(chs, inventory.Created, inventory.Configured); n != len(chs) {
			b.Fatal(n)
		}
	}
}

// cached is a ConfigMap trigger as the trigger caches hold it.
func cached(t *testing.T, uid string) *cluster.Object {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("ns")
	u.SetName(uid)
	u.SetUID(types.UID(uid))
	o, err := cluster.Triggers.FromList(u)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
