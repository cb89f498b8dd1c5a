package policyreport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/workqueue"
)

// FieldManager is the field manager of Sprout's report writes.
const FieldManager = "sprout-reports"

// Options bound a Writer's writes.
type Options struct {
	// QPS bounds the report writes a second, Burst those at once (twice
	// QPS when 0).
	QPS   float64
	Burst int
	// Workers is how many reports are written at once.
	Workers int
	Logger  *slog.Logger
}

// DefaultOptions are `sprout run`'s.
func DefaultOptions() Options { return Options{QPS: 20, Workers: 2} }

// Writer keeps, per trigger, the latest result of each policy and writes
// the reports whose results changed. Its methods are safe for concurrent
// use and never wait for a write.
type Writer struct {
	client  dynamic.Interface
	opts    Options
	log     *slog.Logger
	limiter *rate.Limiter
	queue   workqueue.TypedRateLimitingInterface[types.UID]
	// off is set when the cluster has no report CRDs.
	off atomic.Bool

	mu       sync.Mutex
	triggers map[types.UID]*held
}

// held is what a trigger's report holds, or is about to.
type held struct {
	trigger Trigger
	results entries
}

// NewWriter returns a Writer that writes with client.
func NewWriter(client dynamic.Interface, opts Options) *Writer {
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
		client: client, opts: opts, log: log,
		limiter:  rate.NewLimiter(rate.Limit(opts.QPS), opts.Burst),
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](), workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "reports"}),
		triggers: map[types.UID]*held{},
	}
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
	if r == nil {
		if h == nil {
			return
		}
		var dropped bool
		if h.results, dropped = h.results.without(policy); !dropped {
			return
		}
	} else {
		if h == nil {
			h = &held{trigger: t}
			w.triggers[t.UID] = h
		}
		if i, ok := h.results.find(policy); ok && h.results[i].says(r) {
			return
		}
		h.results = h.results.set(entryOf(r, time.Now().Unix()))
	}
	w.queue.Add(t.UID)
}

// Forget drops what is held for a deleted trigger: the garbage collector
// removes its report.
func (w *Writer) Forget(uid types.UID) {
	if w == nil {
		return
	}
	w.mu.Lock()
	delete(w.triggers, uid)
	w.mu.Unlock()
}

// DropPolicy removes a deleted policy's results from every report.
func (w *Writer) DropPolicy(policy string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid, h := range w.triggers {
		var dropped bool
		if h.results, dropped = h.results.without(policy); dropped {
			w.queue.Add(uid)
		}
	}
}

// Run writes reports until ctx is done; after Load turned the writer off,
// it returns at once.
func (w *Writer) Run(ctx context.Context) {
	defer w.queue.ShutDown()
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

// write makes the report of the trigger uid hold what is held for it, or
// deletes it when nothing is.
func (w *Writer) write(ctx context.Context, uid types.UID) error {
	w.mu.Lock()
	h := w.triggers[uid]
	if h == nil {
		w.mu.Unlock()
		return nil // forgotten: its trigger is gone
	}
	t, results := h.trigger, slices.Clone(h.results)
	w.mu.Unlock()
	if err := w.limiter.Wait(ctx); err != nil {
		return err
	}
	client := w.client.Resource(resourceOf(t)).Namespace(t.Namespace)
	if len(results) == 0 {
		err := client.Delete(ctx, string(uid), metav1.DeleteOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			w.forgetEmpty(uid)
			return nil
		}
		return fmt.Errorf("%s %s report: delete: %w", t.Kind, ref(t), err)
	}
	_, err := client.Apply(ctx, string(uid), reportObject(t, results), metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if apierrors.IsNotFound(err) || isTerminating(err) {
		return nil // the trigger's namespace is gone
	}
	if err != nil {
		return fmt.Errorf("%s %s report: apply: %w", t.Kind, ref(t), err)
	}
	return nil
}

// forgetEmpty drops the trigger uid once its report is deleted, unless a
// result came meanwhile.
func (w *Writer) forgetEmpty(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h := w.triggers[uid]; h != nil && len(h.results) == 0 {
		delete(w.triggers, uid)
	}
}

func isTerminating(err error) bool {
	var status apierrors.APIStatus
	return apierrors.IsForbidden(err) && errors.As(err, &status) &&
		apierrors.HasStatusCause(err, "NamespaceTerminating")
}

func ref(t Trigger) string {
	if t.Namespace == "" {
		return t.Name
	}
	return t.Namespace + "/" + t.Name
}
