package main

// The faults of issue #8 ("Reliability"), each against a real control plane
// and a real `sprout run` process: killed mid-generation, the API server
// stopped, watches broken with expired resourceVersions, SIGTERM under
// load. docs/reliability.md lists them with what Sprout does.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/reconcile"
)

// TestKilledMidGenerationLeavesExactlyTheDesiredSet: a controller killed
// (SIGKILL) while generating 1,000 downstreams leaves only whole, labelled
// objects; the next one finds them, generates the rest and records all of
// them: nothing missing, duplicated or unlabelled.
func TestKilledMidGenerationLeavesExactlyTheDesiredSet(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	s := newBulk(t, cp, "killed", false)
	s.createTriggers(0, 1000, "v1")
	kubeconfig := writeKubeconfig(t, cp)

	first := startProcess(t, kubeconfig, "--kube-api-qps", "-1")
	within(t, "a few hundred downstreams", 45*time.Second, func(ctx context.Context) bool {
		return s.countLabelled(ctx) >= 300
	})
	first.kill(t)
	before := s.uids()
	if len(before) >= 1000 {
		t.Fatalf("all %d downstreams existed when the controller was killed: the test proves nothing", len(before))
	}
	t.Logf("killed with %d of 1000 downstreams generated", len(before))

	startProcess(t, kubeconfig, "--kube-api-qps", "-1")
	within(t, "1000 downstreams after the restart", 45*time.Second, func(ctx context.Context) bool {
		return s.countLabelled(ctx) >= 1000
	})
	s.expectExactly(s.triggers())
	for name, uid := range s.uids() {
		if old, ok := before[name]; ok && old != uid {
			t.Errorf("%s was created again after the restart (UID %s, was %s)", name, uid, old)
		}
	}

	// The record names every object, each once, and counts them all.
	var rec *sproutv1alpha1.PolicyInventory
	within(t, "the record to count 1000 objects, Ready", 30*time.Second, func(ctx context.Context) bool {
		rec = s.record(ctx)
		return rec != nil && rec.Status.Objects == 1000 && rec.Status.Triggers == 1000 &&
			meta.IsStatusConditionTrue(rec.Status.Conditions, reconcile.ConditionReady)
	})
	want := map[string]bool{}
	for name, trigger := range s.triggers() {
		want[string(trigger.UID)+" ConfigMap/"+s.ns+"/"+name+"-out"] = true
	}
	got := map[string]bool{}
	for _, g := range rec.Spec.Generated {
		if got[g] {
			t.Errorf("the record holds %q twice", g)
		}
		got[g] = true
		if !want[g] {
			t.Errorf("the record holds %q, which is not a downstream of a trigger", g)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the record holds %d generated objects, want %d", len(got), len(want))
	}
	if !slices.ContainsFunc(rec.Spec.Resources, func(r sproutv1alpha1.Resource) bool { return r.Resource == "configmaps" }) {
		t.Errorf("the record does not name configmaps among the resources written: %v", rec.Spec.Resources)
	}
}

// TestAPIServerOutage: kube-apiserver is stopped for 30 s in the middle of a
// generation and started again on the same etcd. Sprout, the leader, stays
// up and backs off while it is down (requests counted at the proxy, CPU
// time read from /proc), then reconnects its watches and converges, on
// triggers created and deleted after the restart too.
func TestAPIServerOutage(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	s := newBulk(t, cp, "outage", true)
	s.createTriggers(0, 300, "v1")
	proxy := newAPIProxy(t, cp.Config)
	// A leader that cannot renew its Lease for --leader-elect-renew-deadline
	// stops and exits (docs/reliability.md): this one rides out the 30 s and
	// the API server's start after them, which is slow on a machine busy
	// with other tests. The
	// rate limit keeps the generation under way until the server stops:
	// a stopping API server still answers while it drains, and at 50
	// requests a second the 300 creates once ended before it was down.
	p := startProcess(t, proxy.kubeconfig(t), "--leader-elect", "--leader-election-namespace", "default",
		"--leader-elect-lease-duration", "120s", "--leader-elect-renew-deadline", "90s", "--leader-elect-retry-period", "2s",
		"--kube-api-qps", "10", "--kube-api-burst", "10")
	within(t, "the generation under way", 30*time.Second, func(ctx context.Context) bool {
		return s.countLabelled(ctx) >= 30
	})
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	requests, cpu, down := proxy.requests.Load(), p.cpuTime(t), time.Now()
	seen := &tally{}
	proxy.fault.Store(seen.fault())
	// The outage lasts 30 s, all along which the process must stay up.
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 30*time.Second, false, func(context.Context) (bool, error) {
		if !p.alive() {
			return false, errors.New("sprout exited while the API server was down")
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Fatal(err)
	}
	outage := time.Since(down)
	requests, cpu = proxy.requests.Load()-requests, p.cpuTime(t)-cpu
	proxy.fault.Store(nil)
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	t.Logf("while the API server was down for %s: %d requests, %s of CPU\n%s", outage.Round(time.Second), requests, cpu, seen)
	if n := s.countLabelled(context.Background()); n >= 300 {
		t.Fatalf("all %d downstreams existed before the outage: the test proves nothing", n)
	}
	if requests == 0 {
		t.Errorf("sprout sent no request while the API server was down: the test proves nothing")
	}
	if limit := int64(20 * 30); requests > limit {
		t.Errorf("sprout sent %d requests in the 30 s the API server was down, more than %d: a busy loop\n%s", requests, limit, seen)
	}
	if cpu > 3*time.Second {
		t.Errorf("sprout used %s of CPU in the 30 s the API server was down: a busy loop", cpu)
	}

	// Changes after the restart reach Sprout through its watches.
	for i := range 10 {
		if err := s.kube.CoreV1().ConfigMaps(s.ns).Delete(context.Background(), fmt.Sprintf("t-%04d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.createTriggers(300, 320, "v1")
	within(t, "the downstreams of 310 triggers", 90*time.Second, func(ctx context.Context) bool {
		l, err := s.kube.CoreV1().ConfigMaps(s.ns).List(ctx, metav1.ListOptions{LabelSelector: sproutv1alpha1.LabelPolicyName + "=" + s.ns})
		if err != nil || len(l.Items) != 310 {
			return false
		}
		for _, cm := range l.Items {
			if cm.Name < "t-0010" {
				return false
			}
		}
		return true
	})
	t.Logf("converged %s after the API server was back", time.Since(up).Round(time.Second))
	s.expectExactly(s.triggers())
	if !p.alive() {
		t.Errorf("sprout exited")
	}
}

// TestBrokenWatchesExpireAndRelist: every watch Sprout holds is cut, and
// each that resumes from the resourceVersion it had reached is answered,
// once the cluster has changed behind its back, 410 Gone (an ERROR event
// with reason Expired, as the API server sends for a resourceVersion older
// than its watch cache). Sprout lists again and converges: downstreams of
// triggers created meanwhile appear, those of deleted ones are pruned, an
// edited trigger's is updated and a deleted downstream is back; and its
// watches work again afterwards.
func TestBrokenWatchesExpireAndRelist(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	s := newBulk(t, cp, "relist", true)
	s.createTriggers(0, 5, "v1")
	proxy := newAPIProxy(t, cp.Config)
	breaker := &watchBreaker{open: map[*http.Request]openWatch{}}
	proxy.fault.Store(breaker.fault())
	t.Cleanup(func() {
		if t.Failed() {
			breaker.mu.Lock()
			defer breaker.mu.Unlock()
			t.Logf("watches after the cut at %d:\n%s", breaker.before, strings.Join(breaker.seen, "\n"))
		}
	})
	startProcess(t, proxy.kubeconfig(t))
	within(t, "the first downstreams", 30*time.Second, func(context.Context) bool {
		return s.mismatch(s.triggers()) == nil
	})

	var cut map[string]int
	within(t, "every watch open for over a second, to cut", 30*time.Second, func(context.Context) bool {
		cut = breaker.cut(t, s.currentVersion())
		return cut != nil
	})
	if cut["/api/v1/configmaps"] < 2 {
		t.Fatalf("cut %v: want the watches of triggers and of downstreams (both configmaps)", cut)
	}
	// A reflector whose watch broke waits out a jittered backoff, which a
	// loaded machine stretches, before it watches again.
	within(t, "the configmaps watches to resume, held", time.Minute, func(context.Context) bool {
		return breaker.holding("/api/v1/configmaps") >= cut["/api/v1/configmaps"]
	})
	ctx := context.Background()
	configMaps := s.kube.CoreV1().ConfigMaps(s.ns)
	for _, name := range []string{"t-0000", "t-0001", "t-0003-out"} {
		if err := configMaps.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := configMaps.Patch(ctx, "t-0002", types.MergePatchType, []byte(`{"data":{"value":"v2"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	s.createTriggers(5, 8, "v1")
	breaker.expire()

	within(t, "the downstreams of the triggers as they are now", 45*time.Second, func(context.Context) bool {
		return s.mismatch(s.triggers()) == nil
	})
	s.expectExactly(s.triggers())
	if n := breaker.expired.Load(); n < int64(cut["/api/v1/configmaps"]) {
		t.Errorf("%d watches answered 410 Gone, want at least the %d cut configmaps watches", n, cut["/api/v1/configmaps"])
	}
	if n := breaker.relisted("/api/v1/configmaps"); n < cut["/api/v1/configmaps"] {
		t.Errorf("configmaps listed again %d times after their watches expired, want %d", n, cut["/api/v1/configmaps"])
	}

	// The watches are back: a trigger created now is seen without a list.
	lists := breaker.relisted("/api/v1/configmaps")
	s.createTriggers(8, 9, "v1")
	within(t, "the downstream of a trigger created after the relist", 30*time.Second, func(context.Context) bool {
		return s.mismatch(s.triggers()) == nil
	})
	if n := breaker.relisted("/api/v1/configmaps"); n != lists {
		t.Errorf("configmaps were listed %d more times to see a new trigger: the watch did not resume", n-lists)
	}
}

// currentVersion is the resourceVersion of the cluster now: a list's.
func (s *bulk) currentVersion() int64 {
	s.t.Helper()
	l, err := s.kube.CoreV1().ConfigMaps(s.ns).List(context.Background(), metav1.ListOptions{Limit: 1})
	if err != nil {
		s.t.Fatal(err)
	}
	rv, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
	if err != nil {
		s.t.Fatal(err)
	}
	return rv
}

// watchBreaker breaks watches at the proxy. cut ends every watch under way
// and holds back each watch that resumes from a resourceVersion up to the
// one given (resourceVersions are etcd revisions: numbers, in order);
// expire answers those 410 Gone. Other requests pass; reads, among them
// lists and watches that list (sendInitialEvents), are counted by path
// after the cut.
type watchBreaker struct {
	mu      sync.Mutex
	open    map[*http.Request]openWatch
	before  int64         // resume watches from here or earlier expire
	gate    chan struct{} // closed by expire
	held    map[string]int
	lists   map[string]int
	expired atomic.Int64
	seen    []string // the watches asked for after the cut, for a failure's log
}

func (b *watchBreaker) fault() *fault {
	f := fault(func(w http.ResponseWriter, r *http.Request, forward http.Handler) {
		q := r.URL.Query()
		watching := q.Get("watch") == "true" || q.Get("watch") == "1"
		listing := r.Method == http.MethodGet && (!watching || q.Get("sendInitialEvents") == "true")
		rv, _ := strconv.ParseInt(q.Get("resourceVersion"), 10, 64)
		b.mu.Lock()
		if b.gate != nil && listing {
			b.lists[r.URL.Path]++
		}
		if b.gate != nil && watching {
			b.seen = append(b.seen, fmt.Sprintf("%s rv=%d sendInitialEvents=%s", r.URL.Path, rv, q.Get("sendInitialEvents")))
		}
		if !watching {
			b.mu.Unlock()
			forward.ServeHTTP(w, r)
			return
		}
		if b.gate != nil && q.Get("sendInitialEvents") != "true" && rv > 0 && rv <= b.before {
			b.held[r.URL.Path]++
			gate := b.gate
			b.mu.Unlock()
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
			b.expired.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			fmt.Fprintf(w, `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",`+
				`"message":"too old resource version: %d (%d)","reason":"Expired","code":410}}`+"\n", rv, b.before+1)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		b.open[r] = openWatch{cancel: cancel, since: time.Now()}
		b.mu.Unlock()
		defer func() {
			b.mu.Lock()
			delete(b.open, r)
			b.mu.Unlock()
			cancel()
		}()
		forward.ServeHTTP(w, r.WithContext(ctx))
	})
	return &f
}

// openWatch is a watch under way: its end, and when it began.
type openWatch struct {
	cancel context.CancelFunc
	since  time.Time
}

// settled is how long every watch must have been open for cut to end it.
// A reflector whose watch ends within a second of its start, before any
// event, lists again rather than resume (client-go's "very short watch"),
// and never asks to resume from where it was.
const settled = 1500 * time.Millisecond

// cut ends every watch under way, and returns how many per path; nil,
// ending none, while one has been open less than settled.
func (b *watchBreaker) cut(t *testing.T, before int64) map[string]int {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.open {
		if time.Since(w.since) < settled {
			return nil
		}
	}
	b.before, b.gate = before, make(chan struct{})
	b.held, b.lists = map[string]int{}, map[string]int{}
	cut := map[string]int{}
	for r, w := range b.open {
		w.cancel()
		cut[r.URL.Path]++
	}
	t.Logf("cut watches %v at resourceVersion %d", cut, before)
	return cut
}

// expire answers the held watches, and any later one that resumes from
// before the cut, 410 Gone.
func (b *watchBreaker) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.gate)
}

func (b *watchBreaker) holding(path string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held[path]
}

func (b *watchBreaker) relisted(path string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lists[path]
}

// TestSIGTERMUnderLoad: SIGTERM to the leader in the middle of a
// generation, while one apply is under way (held at the proxy). The leader
// waits for that write, writes nothing more, releases the Lease and exits 0
// within the grace period; every object it wrote is whole and labelled, and
// the next leader writes only what is missing, with no conflict.
func TestSIGTERMUnderLoad(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	s := newBulk(t, cp, "sigterm", true)
	s.createTriggers(0, 500, "v1")
	proxy := newAPIProxy(t, cp.Config)
	kubeconfig := proxy.kubeconfig(t)
	// A Lease not released would keep the next leader waiting 15 s.
	leaderFlags := []string{"--leader-elect", "--leader-election-namespace", "default",
		"--leader-elect-lease-duration", "15s", "--leader-elect-renew-deadline", "10s", "--leader-elect-retry-period", "1s",
		"--kube-api-qps", "-1"}

	first := startProcess(t, kubeconfig, leaderFlags...)
	within(t, "the generation under way", 30*time.Second, func(ctx context.Context) bool {
		return s.countLabelled(ctx) >= 50
	})
	held := &heldApply{path: make(chan string, 1), release: make(chan struct{})}
	proxy.fault.Store(held.fault())
	var inFlight string
	select {
	case inFlight = <-held.path:
	case <-time.After(30 * time.Second):
		t.Fatal("no apply to hold")
	}
	signalled := time.Now()
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Having taken the signal, sprout stops serving its probes; it must still
	// be running then, its write under way.
	probes := first.probes()
	if probes == "" {
		t.Fatal("sprout generated before serving its probes")
	}
	within(t, "sprout to take the signal", 10*time.Second, func(ctx context.Context) bool {
		code, _ := first.get(ctx, probes, "/healthz")
		return code == 0
	})
	if !first.alive() {
		t.Fatalf("sprout exited without waiting for its write under way, %s", inFlight)
	}
	close(held.release)
	if err := first.exited(t, 10*time.Second-time.Since(signalled)); err != nil {
		t.Fatalf("sprout's exit after SIGTERM: %v", err)
	}
	t.Logf("exited %s after SIGTERM", time.Since(signalled).Round(time.Millisecond))
	lease, err := s.kube.CoordinationV1().Leases("default").Get(context.Background(), "sprout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the Lease is still held by %s after the leader exited", *h)
	}
	before := s.uids()
	if len(before) >= 500 {
		t.Fatalf("all %d downstreams existed at SIGTERM: the test proves nothing", len(before))
	}
	if _, ok := before[path.Base(inFlight)]; !ok {
		t.Errorf("%s, under way when SIGTERM came, was abandoned: it does not exist", inFlight)
	}
	triggers := s.triggers()
	for _, cm := range s.list() {
		if strings.HasSuffix(cm.Name, "-out") {
			if err := s.whole(cm, triggers[strings.TrimSuffix(cm.Name, "-out")]); err != nil {
				t.Errorf("after SIGTERM: %v", err)
			}
		}
	}

	proxy.reset()
	startProcess(t, kubeconfig, leaderFlags...)
	within(t, "the next leader to complete the set", 45*time.Second, func(context.Context) bool {
		return s.mismatch(triggers) == nil
	})
	if n := proxy.conflicts.Load(); n != 0 {
		t.Errorf("the next leader met %d conflicts", n)
	}
	for name, uid := range s.uids() {
		if old, ok := before[name]; ok && old != uid {
			t.Errorf("%s was created again (UID %s, was %s)", name, uid, old)
		}
	}
	applied := 0
	for _, w := range proxy.written() {
		_, path, _ := strings.Cut(w, " ") // a create (POST) or an apply (PATCH)
		if name, ok := strings.CutPrefix(path, "/api/v1/namespaces/"+s.ns+"/configmaps/"); ok {
			applied++
			if _, ok := before[name]; ok {
				t.Errorf("the next leader wrote %s again, which the first had written whole", name)
			}
		}
	}
	if want := 500 - len(before); applied != want {
		t.Errorf("the next leader applied %d downstreams, want the %d missing", applied, want)
	}
}

// heldApply holds back the first apply (not a dry run) of a downstream
// that reaches the proxy until release is closed, and sends its path.
type heldApply struct {
	once    sync.Once
	path    chan string
	release chan struct{}
}

func (h *heldApply) fault() *fault {
	f := fault(func(w http.ResponseWriter, r *http.Request, forward http.Handler) {
		first := false
		write := r.Method == http.MethodPatch || r.Method == http.MethodPost
		if write && !r.URL.Query().Has("dryRun") && strings.Contains(controlplane.ObjectPath(r), "/configmaps/t-") {
			h.once.Do(func() { first = true })
		}
		if !first {
			forward.ServeHTTP(w, r)
			return
		}
		h.path <- controlplane.ObjectPath(r)
		select {
		case <-h.release:
		case <-r.Context().Done():
			return // the client gave up on it: it never reaches the server
		}
		forward.ServeHTTP(w, r)
	})
	return &f
}

// tally counts the requests it forwards by method and path, the names of
// triggers and downstreams (t-…) cut, for a failure message.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *tally) fault() *fault {
	f := fault(func(w http.ResponseWriter, r *http.Request, forward http.Handler) {
		parts := strings.Split(r.URL.Path, "/")
		for i, p := range parts {
			if strings.HasPrefix(p, "t-") {
				parts[i] = "*"
			}
		}
		c.mu.Lock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[r.Method+" "+strings.Join(parts, "/")]++
		c.mu.Unlock()
		forward.ServeHTTP(w, r)
	})
	return &f
}

func (c *tally) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lines []string
	for k, v := range c.n {
		lines = append(lines, fmt.Sprintf("%6d %s", v, k))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// within polls cond every 100 ms for up to timeout.
func within(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// kill kills the process (SIGKILL) and waits until it is gone.
func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := <-p.done
	p.done <- err
}

// bulk is a namespace of ConfigMap triggers and a GeneratingPolicy, of the
// same name, that generates for each trigger t a ConfigMap t-out beside it,
// holding its data.value (testpolicies/derived.yaml).
type bulk struct {
	t    *testing.T
	ns   string
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func newBulk(t *testing.T, cp *controlplane.ControlPlane, name string, synchronize bool) *bulk {
	t.Helper()
	s := &bulk{t: t, ns: name, kube: kubernetes.NewForConfigOrDie(cp.Config), dyn: dynamic.NewForConfigOrDie(cp.Config)}
	ctx := context.Background()
	if _, err := s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applyDocs(t, cp, fixtures.MustPolicyFile("derived", fixtures.Params{Name: name, App: name,
		Suffix: "out", Value: "bulk", Synchronize: synchronize, GenerateExisting: true}))
	return s
}

// createTriggers creates the triggers t-<from> to t-<to-1>, 16 at a time.
func (s *bulk) createTriggers(from, to int, value string) {
	s.t.Helper()
	names := make(chan string)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 16 {
		wg.Go(func() {
			for name := range names {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": s.ns}}, Data: map[string]string{"value": value}}
				if _, err := s.kube.CoreV1().ConfigMaps(s.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					failed.Store(err)
				}
			}
		})
	}
	for i := from; i < to; i++ {
		names <- fmt.Sprintf("t-%04d", i)
	}
	close(names)
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		s.t.Fatalf("creating triggers: %v", err)
	}
}

// list lists the ConfigMaps of the namespace, labelled or not.
func (s *bulk) list() []corev1.ConfigMap {
	s.t.Helper()
	l, err := s.kube.CoreV1().ConfigMaps(s.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return l.Items
}

// triggers returns the triggers by name.
func (s *bulk) triggers() map[string]corev1.ConfigMap {
	s.t.Helper()
	out := map[string]corev1.ConfigMap{}
	for _, cm := range s.list() {
		if cm.Labels["app"] == s.ns {
			out[cm.Name] = cm
		}
	}
	return out
}

// uids returns the UIDs of the downstreams by name.
func (s *bulk) uids() map[string]types.UID {
	s.t.Helper()
	out := map[string]types.UID{}
	for _, cm := range s.list() {
		if strings.HasSuffix(cm.Name, "-out") {
			out[cm.Name] = cm.UID
		}
	}
	return out
}

// countLabelled counts the downstreams the policy's label selects.
func (s *bulk) countLabelled(ctx context.Context) int {
	l, err := s.kube.CoreV1().ConfigMaps(s.ns).List(ctx, metav1.ListOptions{LabelSelector: sproutv1alpha1.LabelPolicyName + "=" + s.ns})
	if err != nil {
		return -1
	}
	return len(l.Items)
}

// expectExactly checks that the downstreams are exactly those of triggers:
// one per trigger, whole (the trigger's data) and labelled with their
// origin, and no other object named like one.
func (s *bulk) expectExactly(triggers map[string]corev1.ConfigMap) {
	s.t.Helper()
	if err := s.mismatch(triggers); err != nil {
		s.t.Error(err)
	}
}

// mismatch says how the downstreams differ from exactly those of triggers,
// or returns nil.
func (s *bulk) mismatch(triggers map[string]corev1.ConfigMap) error {
	var errs []error
	seen := map[string]bool{}
	for _, cm := range s.list() {
		if !strings.HasSuffix(cm.Name, "-out") {
			continue
		}
		trigger, ok := triggers[strings.TrimSuffix(cm.Name, "-out")]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s exists, but its trigger does not", cm.Name))
			continue
		case seen[string(trigger.UID)]:
			errs = append(errs, fmt.Errorf("%s is a second downstream of trigger %s", cm.Name, trigger.Name))
		}
		seen[string(trigger.UID)] = true
		if err := s.whole(cm, trigger); err != nil {
			errs = append(errs, err)
		}
	}
	for name, trigger := range triggers {
		if !seen[string(trigger.UID)] {
			errs = append(errs, fmt.Errorf("trigger %s has no downstream", name))
		}
	}
	return errors.Join(errs...)
}

// whole reports what is wrong with the downstream cm of trigger: a label
// or data that differs from what the policy generates.
func (s *bulk) whole(cm, trigger corev1.ConfigMap) error {
	want := map[string]string{
		sproutv1alpha1.LabelManagedBy:        sproutv1alpha1.ManagedBy,
		sproutv1alpha1.LabelPolicyName:       s.ns,
		sproutv1alpha1.LabelTriggerName:      trigger.Name,
		sproutv1alpha1.LabelTriggerNamespace: s.ns,
		sproutv1alpha1.LabelTriggerUID:       string(trigger.UID),
		sproutv1alpha1.LabelTriggerKind:      "ConfigMap",
		sproutv1alpha1.LabelTriggerVersion:   "v1",
	}
	for k, v := range want {
		if cm.Labels[k] != v {
			return fmt.Errorf("%s: label %s=%q, want %q (labels %v)", cm.Name, k, cm.Labels[k], v, cm.Labels)
		}
	}
	if cm.Data["from"] != trigger.Data["value"] || cm.Name != trigger.Name+"-out" {
		return fmt.Errorf("%s holds %v, want %s-out holding from=%s", cm.Name, cm.Data, trigger.Name, trigger.Data["value"])
	}
	return nil
}

// record returns the policy's PolicyInventory, or nil.
func (s *bulk) record(ctx context.Context) *sproutv1alpha1.PolicyInventory {
	u, err := s.dyn.Resource(sproutv1alpha1.PolicyInventories).Get(ctx, "gpol."+s.ns, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	rec := &sproutv1alpha1.PolicyInventory{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rec); err != nil {
		s.t.Errorf("the record: %v", err)
		return nil
	}
	return rec
}

// cpuTime is the CPU time the process has used, from /proc.
func (p *process) cpuTime(t *testing.T) time.Duration {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name (which may hold spaces): utime and
	// stime are the 12th and 13th, in clock ticks of 1/100 s.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, err1 := strconv.Atoi(fields[11])
	stime, err2 := strconv.Atoi(fields[12])
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", p.cmd.Process.Pid, stat)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// alive reports whether the process is still running.
func (p *process) alive() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return false
	default:
		return true
	}
}
