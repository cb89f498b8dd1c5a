package policyreport

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
)

// FieldManager is the field manager of Sprout's report writes.
const FieldManager = "sprout-reports"

// Options bound a Writer's writes.
type Options struct {
	// API is the report API written: wgpolicyk8s.io (the zero value) or
	// openreports.io.
	API API
	// QPS bounds the report writes a second, Burst those at once (twice
	// QPS when 0).
	QPS   float64
	Burst int
	// Workers is how many reports are written at once.
	Workers int
	Logger  *slog.Logger
	// Yield, when set, is called before the read of the reports written
	// before and before each write, and may hold them back: the controller
	// holds them while it generates, so that they take nothing from the
	// API server a generation is waiting on.
	Yield func(context.Context)
}

// DefaultOptions are `sprout run`'s.
func DefaultOptions() Options { return Options{QPS: 20, Workers: 2} }

// Writer keeps, per trigger, the latest result of each policy and writes
// the reports whose results changed. Its methods are safe for concurrent
// use and never wait for a write.
//
// A report may hold the results of policies another Writer owns, as two
// shards' policies on one trigger do: a Writer writes only the results it
// changed, over the report as it is on the server, and leaves the others
// as they are (write.go).
type Writer struct {
	client  dynamic.Interface
	raw     rest.Interface
	opts    Options
	log     *slog.Logger
	limiter *rate.Limiter
	queue   workqueue.TypedRateLimitingInterface[types.UID]
	// off is set when the cluster has no report CRDs.
	off atomic.Bool

	mu       sync.Mutex
	triggers map[types.UID]*held
	// changes numbers the changes to results, for held.changed.
	changes uint64
	// loaded is set once the reports written before were read
	// (loadWritten); until then a change is held as one to the report the
	// read may find, and retains are what the read applies to them.
	loaded  bool
	retains []retain
}

// retain is a Retain made before the reports were loaded.
type retain struct {
	policy string
	keep   func(types.UID) bool
}

// held is what a trigger's report holds, or is about to.
type held struct {
	trigger Trigger
	// results are every policy's, as the report held them when last read
	// or written, with the changes made since.
	results entries
	// changed are the policies whose results changed since the last write;
	// only they are written.
	changed changes
	// version is the report's resourceVersion when last read or written;
	// "" when it is not known to exist.
	version string
	// gone is set when the trigger was deleted: its report is deleted.
	gone bool
}

// NewWriter returns a Writer that writes through cfg, without cfg's
// client-side rate limit: the writer bounds its rate itself, and its
// writes take nothing from the limit of whoever else uses cfg.
func NewWriter(cfg *rest.Config, opts Options) (*Writer, error) {
	own := rest.CopyConfig(cfg)
	own.QPS, own.RateLimiter = -1, nil
	client, err := dynamic.NewForConfig(own)
	if err != nil {
		return nil, fmt.Errorf("PolicyReports: dynamic client: %w", err)
	}
	own.APIPath, own.GroupVersion = "/", &schema.GroupVersion{}
	own.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	raw, err := rest.RESTClientFor(own)
	if err != nil {
		return nil, fmt.Errorf("PolicyReports: REST client: %w", err)
	}
	d := DefaultOptions()
	if opts.QPS <= 0 {
		opts.QPS = d.QPS
	}
	if opts.Burst <= 0 {
		opts.Burst = max(1, int(2*opts.QPS))
	}
	if opts.Workers <= 0 {
		opts.Workers = d.Workers
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Writer{
		client: client, raw: raw, opts: opts, log: log,
		limiter:  rate.NewLimiter(rate.Limit(opts.QPS), opts.Burst),
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](), workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "reports"}),
		triggers: map[types.UID]*held{},
	}, nil
}

// Set makes r policy's result for trigger t; nil removes policy's result.
// Only a change queues the trigger's report.
func (w *Writer) Set(t Trigger, policy string, r *Result) {
	if w == nil || w.off.Load() || t.UID == "" || t.Name == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.triggers[t.UID]
	if h != nil && h.gone {
		return // a result of its deletion: the report goes with the trigger
	}
	switch {
	case h == nil && (r != nil || !w.loaded):
		h = &held{trigger: t}
		w.triggers[t.UID] = h
	case h != nil && h.trigger.Name == "":
		h.trigger = t // held by its UID only, by an Unset before the load
	}
	if r == nil {
		w.unset(h, policy)
		return
	}
	if i, ok := h.results.find(policy); ok && h.results[i].says(r) {
		return
	}
	h.results = h.results.set(entryOf(r, time.Now().Unix()))
	w.changed(h, policy)
}

// Retain removes policy's result from the reports of the triggers keep
// does not keep: those the policy no longer matches.
func (w *Writer) Retain(policy string, keep func(types.UID) bool) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.loaded {
		w.retains = append(w.retains, retain{policy: policy, keep: keep})
	}
	for uid, h := range w.triggers {
		if !keep(uid) {
			w.unset(h, policy)
		}
	}
}

// Unset removes policy's result from the report of the trigger uid.
func (w *Writer) Unset(uid types.UID, policy string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.triggers[uid]
	if h == nil && !w.loaded {
		h = &held{trigger: Trigger{UID: uid}}
		w.triggers[uid] = h
	}
	w.unset(h, policy)
}

// DropPolicy removes a deleted policy's results from every report.
func (w *Writer) DropPolicy(policy string) {
	w.Retain(policy, func(types.UID) bool { return false })
}

// unset removes policy's result from h, if it holds one, or, before the
// load, from the report the load may find. Hold w.mu.
func (w *Writer) unset(h *held, policy string) {
	if h == nil {
		return
	}
	var dropped bool
	if h.results, dropped = h.results.without(policy); dropped || !w.loaded {
		w.changed(h, policy)
	}
}

// changed notes a change to policy's result in h and queues its report.
// Hold w.mu.
func (w *Writer) changed(h *held, policy string) {
	w.changes++
	h.changed = h.changed.mark(policy, w.changes)
	w.queue.Add(h.trigger.UID)
}

// Forget deletes the report of a deleted trigger. The garbage collector
// would too, as the trigger owns it, but only once it gets to it: until
// then the report would still say what a trigger that is no longer there
// did.
func (w *Writer) Forget(uid types.UID) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.triggers[uid]
	if h == nil && !w.loaded {
		h = &held{trigger: Trigger{UID: uid}}
		w.triggers[uid] = h
	}
	if h == nil {
		return
	}
	h.gone, h.results, h.changed = true, nil, nil
	w.queue.Add(uid)
}

// Run reads the reports written before (loadWritten), then writes reports
// until ctx is done; when the read turned the writer off, it returns at
// once.
// Results may be set before and during the load: none is written before it
// ends, and one the report already holds is not written at all.
func (w *Writer) Run(ctx context.Context) {
	defer w.queue.ShutDown()
	w.loadWritten(ctx)
	if w.off.Load() {
		return
	}
	var wg sync.WaitGroup
	for range w.opts.Workers {
		wg.Go(func() {
			for w.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	w.queue.ShutDown()
	wg.Wait()
}

func (w *Writer) next(ctx context.Context) bool {
	uid, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(uid)
	if err := w.write(ctx, uid); err != nil {
		if ctx.Err() != nil {
			return false
		}
		w.log.Error("PolicyReport not written", "trigger", string(uid), "error", err.Error())
		w.queue.AddRateLimited(uid)
		return true
	}
	w.queue.Forget(uid)
	return true
}
