// Package queue is the core's work queue of policies and what changed of
// each since its last sync. A key queued by anything but a trigger event
// is marked for a full sync; a trigger event marks that trigger alone, and
// the sync that takes the key takes what was marked with it (Take). It
// knows nothing of what a sync does: the core decides what a full or a
// partial sync is; it holds only which syncs are under way (Running).
// Workers are shared fairly among tenants (fair.go): one namespace's
// policies do not hold more than their share while another's wait.
package queue

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// MaxChanged bounds the triggers a policy remembers as changed: past it,
// its next sync is a full one, which costs no more than that many
// incremental ones.
const MaxChanged = watches.MaxCovered

// Change is a trigger an event changed since its policy's last sync.
type Change struct {
	GVR schema.GroupVersionResource
	// Key is the trigger's cache Key (namespace/name); empty when only
	// its UID is known (an event on an object it generated).
	Key string
	// Old is the cached object the first event replaced or deleted, whose
	// memo the sync forgets; nil for a create.
	Old *cluster.Object
}

// Changes is what changed for one policy since its last sync: the
// triggers, or everything (full).
type Changes struct {
	Full     bool
	Triggers map[types.UID]Change
}

// changeSets keeps, per policy, what changed since its last sync. It is
// taken whole at the start of a sync; every way of queueing a policy but a
// trigger event marks it full, so whatever is not known to concern a few
// triggers is recomputed in full.
type changeSets struct {
	mu sync.Mutex
	m  map[policy.Key]*Changes
	// arrived are closed at the next mark of their policy (Arrivals).
	arrived map[policy.Key]chan struct{}
}

// marked wakes whoever waits for key's next mark. d.mu is held.
func (d *changeSets) marked(key policy.Key) {
	if ch, ok := d.arrived[key]; ok {
		close(ch)
		delete(d.arrived, key)
	}
}

func (d *changeSets) entry(key policy.Key) *Changes {
	if d.m == nil {
		d.m = map[policy.Key]*Changes{}
	}
	p := d.m[key]
	if p == nil {
		p = &Changes{Triggers: map[types.UID]Change{}}
		d.m[key] = p
	}
	return p
}

func (d *changeSets) markFull(key policy.Key) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.entry(key)
	p.Full, p.Triggers = true, nil
	d.marked(key)
}

// markTrigger notes that the trigger uid of the policy changed. The first
// event's old object and a known cache key are kept.
func (d *changeSets) markTrigger(key policy.Key, uid types.UID, t Change) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.entry(key)
	if p.Full {
		return
	}
	defer d.marked(key)
	if len(p.Triggers) >= MaxChanged {
		p.Full, p.Triggers = true, nil
		return
	}
	if prev, ok := p.Triggers[uid]; ok {
		if t.Key == "" {
			t.Key, t.GVR = prev.Key, prev.GVR
		}
		if prev.Old != nil {
			t.Old = prev.Old
		}
	}
	p.Triggers[uid] = t
}

// take returns what changed for the policy and forgets it; nil when
// nothing was marked, which a sync takes as full.
func (d *changeSets) take(key policy.Key) *Changes {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.m[key]
	delete(d.m, key)
	return p
}

// takeTriggers takes the triggers marked changed for the policy that in
// does not report, if they are at most limit; nil if there are none, more,
// or the policy is marked full. Those in reports stay marked.
func (d *changeSets) takeTriggers(key policy.Key, in func(types.UID) bool, limit int) *Changes {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.m[key]
	if p == nil || p.Full {
		return nil
	}
	out := &Changes{Triggers: map[types.UID]Change{}}
	for uid, t := range p.Triggers {
		if !in(uid) {
			out.Triggers[uid] = t
		}
	}
	if len(out.Triggers) == 0 || len(out.Triggers) > limit {
		return nil
	}
	for uid := range out.Triggers {
		delete(p.Triggers, uid)
	}
	if len(p.Triggers) == 0 {
		delete(d.m, key)
	}
	return out
}

// arrivals returns a channel closed at the policy's next mark, and the
// function that stops waiting for it.
func (d *changeSets) arrivals(key policy.Key) (<-chan struct{}, func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch, ok := d.arrived[key]
	if !ok {
		if d.arrived == nil {
			d.arrived = map[policy.Key]chan struct{}{}
		}
		ch = make(chan struct{})
		d.arrived[key] = ch
	}
	return ch, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.arrived[key] == ch {
			delete(d.arrived, key)
		}
	}
}

// Queue is the work queue of policy keys. Add, AddAfter and
// AddRateLimited mark the policy for a full sync: a policy change, a
// resync, a read resource's change, an RBAC change, a retry. Only a
// trigger event queues it for its triggers (AddTrigger).
type Queue struct {
	workqueue.TypedRateLimitingInterface[policy.Key]
	dirty *changeSets
	// order is the order keys are handed out in, and counts the workers
	// each tenant holds.
	order *fair
	// taken counts the keys a worker took and is not done with, which the
	// queue's length leaves out: a controller is idle only without any.
	taken atomic.Int64
}

// New makes the queue for that many workers, whose metrics go to m.
func New(m *report.Metrics, workers int) *Queue {
	const name = "policies"
	order := newFair(workers)
	base := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[policy.Key]{Name: name, MetricsProvider: m.Queue, Queue: order})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[policy.Key]{
		Name: name, MetricsProvider: m.Queue, Queue: base})
	return &Queue{TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[policy.Key](),
		workqueue.TypedRateLimitingQueueConfig[policy.Key]{Name: name, MetricsProvider: m.Queue, DelayingQueue: delaying}),
		dirty: &changeSets{}, order: order}
}

func (q *Queue) Get() (policy.Key, bool) {
	key, shutdown := q.TypedRateLimitingInterface.Get()
	if !shutdown {
		q.taken.Add(1)
	}
	return key, shutdown
}

// Done releases the key's worker, which its tenant's share counted, before
// the workqueue may hand the key out again.
func (q *Queue) Done(key policy.Key) {
	q.taken.Add(-1)
	q.order.done(key)
	q.TypedRateLimitingInterface.Done(key)
}

func (q *Queue) Add(key policy.Key) {
	q.dirty.markFull(key)
	q.TypedRateLimitingInterface.Add(key)
}

func (q *Queue) AddAfter(key policy.Key, d time.Duration) {
	q.dirty.markFull(key)
	q.TypedRateLimitingInterface.AddAfter(key, d)
}

func (q *Queue) AddRateLimited(key policy.Key) {
	q.dirty.markFull(key)
	q.TypedRateLimitingInterface.AddRateLimited(key)
}

// AddTrigger queues the policy for one changed trigger, after d if d > 0.
func (q *Queue) AddTrigger(key policy.Key, uid types.UID, t Change, d time.Duration) {
	q.dirty.markTrigger(key, uid, t)
	if d > 0 {
		q.TypedRateLimitingInterface.AddAfter(key, d)
		return
	}
	q.TypedRateLimitingInterface.Add(key)
}

// Take returns what changed for the policy since it was last taken, and
// forgets it; nil when nothing was marked, which a sync takes as full.
func (q *Queue) Take(key policy.Key) *Changes { return q.dirty.take(key) }

// TakeTriggers is Take for a sync under way that takes more triggers: it
// takes those marked changed that in does not report (those the sync holds
// already stay marked for the next), if they are at most limit; nil if
// there are none, more, or the policy is marked for a full sync.
func (q *Queue) TakeTriggers(key policy.Key, in func(types.UID) bool, limit int) *Changes {
	return q.dirty.takeTriggers(key, in, limit)
}

// Arrivals returns a channel closed when the policy is next marked changed,
// by a trigger event or for a full sync, and the function that stops
// waiting for it.
func (q *Queue) Arrivals(key policy.Key) (<-chan struct{}, func()) { return q.dirty.arrivals(key) }

// MarkFull marks the policy's next sync a full one, without queueing it.
func (q *Queue) MarkFull(key policy.Key) { q.dirty.markFull(key) }

// Taken counts the keys workers took and are not done with, which Len
// leaves out: a controller is idle only without any.
func (q *Queue) Taken() int64 { return q.taken.Load() }

// Marked counts the policies with changes not yet taken.
func (q *Queue) Marked() int {
	q.dirty.mu.Lock()
	defer q.dirty.mu.Unlock()
	return len(q.dirty.m)
}

// MarkedTriggers lists the triggers of the policy marked changed and not
// yet taken.
func (q *Queue) MarkedTriggers(key policy.Key) []types.UID {
	q.dirty.mu.Lock()
	defer q.dirty.mu.Unlock()
	var out []types.UID
	if p := q.dirty.m[key]; p != nil {
		for uid := range p.Triggers {
			out = append(out, uid)
		}
	}
	return out
}
