package reconcile

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

// maxDirty bounds the triggers a policy remembers as changed: past it,
// its next sync is a full one, which costs no more than that many
// incremental ones.
const maxDirty = watches.MaxCovered

// dirtyTrigger is a trigger an event changed since its policy's last sync.
type dirtyTrigger struct {
	gvr schema.GroupVersionResource
	// key is the trigger's cache key (namespace/name); empty when only
	// its UID is known (an event on an object it generated).
	key string
	// old is the cached object the first event replaced or deleted, whose
	// memo the sync forgets; nil for a create.
	old *cluster.Object
}

// pending is what changed for one policy since its last sync: the
// triggers, or everything (full).
type pending struct {
	full     bool
	triggers map[types.UID]dirtyTrigger
}

// dirtySets keeps, per policy, what changed since its last sync. It is
// taken whole at the start of a sync; every way of queueing a policy but a
// trigger event marks it full, so whatever is not known to concern a few
// triggers is recomputed in full.
type dirtySets struct {
	mu sync.Mutex
	m  map[policy.Key]*pending
}

func (d *dirtySets) entry(key policy.Key) *pending {
	if d.m == nil {
		d.m = map[policy.Key]*pending{}
	}
	p := d.m[key]
	if p == nil {
		p = &pending{triggers: map[types.UID]dirtyTrigger{}}
		d.m[key] = p
	}
	return p
}

func (d *dirtySets) markFull(key policy.Key) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.entry(key)
	p.full, p.triggers = true, nil
}

// markTrigger notes that the trigger uid of the policy changed. The first
// event's old object and a known cache key are kept.
func (d *dirtySets) markTrigger(key policy.Key, uid types.UID, t dirtyTrigger) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.entry(key)
	if p.full {
		return
	}
	if len(p.triggers) >= maxDirty {
		p.full, p.triggers = true, nil
		return
	}
	if prev, ok := p.triggers[uid]; ok {
		if t.key == "" {
			t.key, t.gvr = prev.key, prev.gvr
		}
		if prev.old != nil {
			t.old = prev.old
		}
	}
	p.triggers[uid] = t
}

// take returns what changed for the policy and forgets it; nil when
// nothing was marked, which a sync takes as full.
func (d *dirtySets) take(key policy.Key) *pending {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.m[key]
	delete(d.m, key)
	return p
}

// policyQueue is the work queue of policy keys. Add, AddAfter and
// AddRateLimited mark the policy for a full sync: a policy change, a
// resync, a read resource's change, an RBAC change, a retry. Only a
// trigger event queues it for its triggers (addTrigger).
type policyQueue struct {
	workqueue.TypedRateLimitingInterface[policy.Key]
	dirty *dirtySets
	// taken counts the keys a worker took and is not done with, which the
	// queue's length leaves out: a controller is idle only without any.
	taken atomic.Int64
}

func newPolicyQueue(m *report.Metrics) *policyQueue {
	return &policyQueue{TypedRateLimitingInterface: newQueue[policy.Key]("policies", m), dirty: &dirtySets{}}
}

func (q *policyQueue) Get() (policy.Key, bool) {
	key, shutdown := q.TypedRateLimitingInterface.Get()
	if !shutdown {
		q.taken.Add(1)
	}
	return key, shutdown
}

func (q *policyQueue) Done(key policy.Key) {
	q.taken.Add(-1)
	q.TypedRateLimitingInterface.Done(key)
}

func (q *policyQueue) Add(key policy.Key) {
	q.dirty.markFull(key)
	q.TypedRateLimitingInterface.Add(key)
}

func (q *policyQueue) AddAfter(key policy.Key, d time.Duration) {
	q.dirty.markFull(key)
	q.TypedRateLimitingInterface.AddAfter(key, d)
}

func (q *policyQueue) AddRateLimited(key policy.Key) {
	q.dirty.markFull(key)
	q.TypedRateLimitingInterface.AddRateLimited(key)
}

// addTrigger queues the policy for one changed trigger, after d if d > 0.
func (q *policyQueue) addTrigger(key policy.Key, uid types.UID, t dirtyTrigger, d time.Duration) {
	q.dirty.markTrigger(key, uid, t)
	if d > 0 {
		q.TypedRateLimitingInterface.AddAfter(key, d)
		return
	}
	q.TypedRateLimitingInterface.Add(key)
}

// markAllFull makes the next sync of every policy a full one, without
// queueing any: a change that never queued a policy before (a Namespace's
// annotations) is still seen whole when something else does.
func (c *Controller) markAllFull() {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for key := range c.policies {
		c.queue.dirty.markFull(key)
	}
}
