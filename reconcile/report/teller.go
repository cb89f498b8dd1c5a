package report

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/policyreport"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// Teller tells the outcomes of syncs: it writes each policy's status (by
// status workers, apart from the syncs), its record's status through the
// core, the policies' Events, the PolicyReports and the PolicySources. It
// keeps the outcomes not yet written; what was told of each policy is the
// core's to keep (Told), and so is which policies run.
type Teller struct {
	core    TellerCore
	dynamic dynamic.Interface
	log     *slog.Logger
	// triggerEvents also tells each trigger what was generated for it.
	triggerEvents bool

	// queue holds the policies whose last outcome is not yet written to
	// their status; pending holds the outcomes.
	queue   workqueue.TypedRateLimitingInterface[policy.Key]
	pending pending
	// dropped says, once, that the CRDs drop Sprout's status fields.
	dropped sync.Once

	events      record.EventRecorder
	broadcaster record.EventBroadcaster
	eventSink   typedcorev1.EventInterface
	// reports writes PolicyReports; nil when they are off.
	reports *policyreport.Writer
	sources *Sources
}

// TellerCore is what a Teller asks of the core.
type TellerCore struct {
	// Policy returns the compiled policy running under key, or nil.
	Policy func(key policy.Key) *policy.Compiled
	// Told returns what was told of the policy, nil when it does not run.
	Told func(key policy.Key) *Told
	// Record returns the policy's PolicyInventory from the cache, or nil.
	Record func(key policy.Key) *sproutv1alpha1.PolicyInventory
	// SaveRecordStatus writes an outcome to the status of the policy's
	// record.
	SaveRecordStatus func(ctx context.Context, key policy.Key, cp *policy.Compiled, out Outcome) error
}

// TellerOptions configure a Teller.
type TellerOptions struct {
	Core TellerCore
	// Client writes the policies' status.
	Client dynamic.Interface
	// EventSink receives the Events once Open is called.
	EventSink typedcorev1.EventInterface
	// TriggerEvents also emits an Event on each trigger for what was
	// generated for it.
	TriggerEvents bool
	// Config and PolicyReports make the PolicyReports writer; nil
	// PolicyReports writes none. ReportsYield is how a report write waits
	// for the syncs under way.
	Config        *rest.Config
	PolicyReports *policyreport.Options
	ReportsYield  func(context.Context)
	// Sources configure the PolicySources' writer; its Events and Metrics
	// are the Teller's.
	Sources SourcesOptions
	Metrics *Metrics
	Log     *slog.Logger
}

// NewTeller makes a Teller; nothing is written until its workers run.
func NewTeller(o TellerOptions) (*Teller, error) {
	broadcaster := record.NewBroadcaster()
	t := &Teller{
		core: o.Core, dynamic: o.Client, log: o.Log, triggerEvents: o.TriggerEvents,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[policy.Key](),
			workqueue.TypedRateLimitingQueueConfig[policy.Key]{Name: "status", MetricsProvider: o.Metrics.Queue}),
		broadcaster: broadcaster,
		eventSink:   o.EventSink,
		events:      NewSparingRecorder(broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "sprout"})),
	}
	if o.PolicyReports != nil {
		// A client of its own, so that report writes never take from the
		// rate limit of the generated objects', and between syncs (yield).
		ro := *o.PolicyReports
		ro.Logger, ro.Yield = o.Log, o.ReportsYield
		w, err := policyreport.NewWriter(o.Config, ro)
		if err != nil {
			return nil, err
		}
		t.reports = w
	}
	so := o.Sources
	so.Events, so.Metrics, so.Log = t.events, o.Metrics, o.Log
	t.sources = NewSources(so)
	return t, nil
}

// Open sends the Events to the sink.
func (t *Teller) Open() {
	t.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: t.eventSink})
}

// Close stops the workers once idle and the sending of Events.
func (t *Teller) Close() {
	t.sources.ShutDown()
	t.queue.ShutDown()
	t.broadcaster.Shutdown()
}

// Sources writes the PolicySources.
func (t *Teller) Sources() *Sources { return t.sources }

// pending holds, per policy, the outcome of its last sync until a status
// worker writes it to the policy's status and its record's. A sync does not
// wait for those writes, and outcomes that come faster than they can be
// written are coalesced: only the last one is written.
type pending struct {
	mu sync.Mutex
	m  map[policy.Key]pendingReport
	// writing counts the outcomes taken and not yet written or put back.
	writing int
}

type pendingReport struct {
	cp  *policy.Compiled
	out Outcome
}

// countsDelay is how long a status write that only changes counts waits.
const countsDelay = time.Second

// Later hands a sync's outcome to the status workers.
func (t *Teller) Later(key policy.Key, cp *policy.Compiled, out Outcome) {
	t.pending.mu.Lock()
	if t.pending.m == nil {
		t.pending.m = map[policy.Key]pendingReport{}
	}
	t.pending.m[key] = pendingReport{cp: cp, out: out}
	t.pending.mu.Unlock()
	if told := t.core.Told(key).lastTold(); told != nil && *told == out.Summary() {
		// Only the counts changed: written a little later, with whatever
		// comes meanwhile, so that a burst of triggers costs the API
		// server one status write a second, not one per sync.
		t.queue.AddAfter(key, countsDelay)
		return
	}
	t.queue.Add(key)
}

// Pending counts the policies whose outcome waits to be written.
func (t *Teller) Pending() int {
	t.pending.mu.Lock()
	defer t.pending.mu.Unlock()
	return len(t.pending.m)
}

// Idle reports whether no outcome waits to be written or is being written.
func (t *Teller) Idle() bool {
	t.pending.mu.Lock()
	busy := len(t.pending.m) + t.pending.writing
	t.pending.mu.Unlock()
	return busy == 0 && t.queue.Len() == 0
}

// written ends the write of an outcome taken.
func (p *pending) written() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writing--
}

// has reports whether an outcome of key waits.
func (p *pending) has(key policy.Key) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.m[key]
	return ok
}

// take removes and returns the outcome waiting for key.
func (p *pending) take(key policy.Key) (pendingReport, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.m[key]
	delete(p.m, key)
	if ok {
		p.writing++
	}
	return r, ok
}

// takeAll removes and returns every outcome waiting.
func (p *pending) takeAll() map[policy.Key]pendingReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	all := p.m
	p.m = nil
	return all
}

// putBack returns an outcome whose write failed, unless a newer one came.
func (p *pending) putBack(key policy.Key, r pendingReport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writing--
	if _, newer := p.m[key]; !newer {
		p.m[key] = r
	}
}

// statusWorkers write the outcomes of syncs; two, so that one slow write
// does not hold up the other policies'.
const statusWorkers = 2

// statusDrainTimeout bounds how long a stopping controller spends writing
// the outcomes its last syncs left.
const statusDrainTimeout = 10 * time.Second

// StartStatusWorkers starts the status workers, and returns the function
// that stops them, once the syncs have stopped: it writes what they left.
// Status writes outlive ctx, so that what the last syncs did is written
// before the controller stops, and a restart has nothing to write.
func (t *Teller) StartStatusWorkers(ctx context.Context) (stop func()) {
	statusCtx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for range statusWorkers {
		wg.Go(func() { t.runStatusWorker(statusCtx) })
	}
	return func() {
		t.queue.ShutDown()
		wg.Wait()
		drain, stopDrain := context.WithTimeout(statusCtx, statusDrainTimeout)
		defer stopDrain()
		t.writePending(drain)
	}
}

// writePending writes every outcome not yet written, delayed or not: a
// stopping controller does, once its status workers have stopped.
func (t *Teller) writePending(ctx context.Context) {
	for key, p := range t.pending.takeAll() {
		if err := t.report(ctx, key, p.cp, p.out); err != nil {
			t.log.Error("status not written before stopping", "policy", key.String(), "error", err.Error())
		}
	}
}

// runStatusWorker writes outcomes until the status queue shuts down and is
// drained.
func (t *Teller) runStatusWorker(ctx context.Context) {
	for {
		key, shutdown := t.queue.Get()
		if shutdown {
			return
		}
		if p, ok := t.pending.take(key); ok {
			if err := t.report(ctx, key, p.cp, p.out); err != nil && ctx.Err() == nil && t.running(key, p.cp) {
				t.log.Error("status not written", "policy", key.String(), "error", err.Error())
				t.pending.putBack(key, p)
				t.queue.AddRateLimited(key)
			} else {
				t.pending.written()
				t.core.Told(key).tell(p.out.Summary())
				t.queue.Forget(key)
			}
		}
		t.queue.Done(key)
	}
}

// running reports whether cp's policy still runs: the outcome of a policy
// deleted since has nowhere to go, neither the policy nor its record.
func (t *Teller) running(key policy.Key, cp *policy.Compiled) bool {
	cur := t.core.Policy(key)
	return cur != nil && cur.Policy.GetUID() == cp.Policy.GetUID()
}

// report writes the outcome of a sync to the policy's status and to its
// record's at the same time: two objects, each a request or none. The
// outcome of a policy deleted since is not written.
func (t *Teller) report(ctx context.Context, key policy.Key, cp *policy.Compiled, out Outcome) error {
	if !t.running(key, cp) {
		return nil
	}
	var statusErr error
	var wg sync.WaitGroup
	wg.Go(func() { statusErr = t.Status(ctx, t.freshest(key, cp), out) })
	recordErr := t.core.SaveRecordStatus(ctx, key, cp, out)
	wg.Wait()
	return errors.Join(statusErr, recordErr)
}

// freshest returns the running copy of cp's policy when it is the same
// generation: its status is the last the cache saw, so an outcome already
// written is not written again.
func (t *Teller) freshest(key policy.Key, cp *policy.Compiled) *policy.Compiled {
	if cur := t.core.Policy(key); cur != nil && cur.Policy.GetUID() == cp.Policy.GetUID() && cur.Policy.GetGeneration() == cp.Policy.GetGeneration() {
		return cur
	}
	return cp
}
