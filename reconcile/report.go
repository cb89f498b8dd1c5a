package reconcile

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// reports holds, per policy, the outcome of its last sync until a status
// worker writes it to the policy's status and its record's. A sync does not
// wait for those writes, and outcomes that come faster than they can be
// written are coalesced: only the last one is written.
type reports struct {
	mu      sync.Mutex
	pending map[policy.Key]pendingReport
	// writing counts the outcomes taken and not yet written or put back.
	writing int
	// dropped says, once, that the CRDs drop Sprout's status fields.
	dropped sync.Once
}

type pendingReport struct {
	cp  *policy.Compiled
	out outcome
}

// reportLater hands a sync's outcome to the status workers.
func (c *Controller) reportLater(key policy.Key, cp *policy.Compiled, out outcome) {
	c.reports.mu.Lock()
	if c.reports.pending == nil {
		c.reports.pending = map[policy.Key]pendingReport{}
	}
	c.reports.pending[key] = pendingReport{cp: cp, out: out}
	c.reports.mu.Unlock()
	if told := c.states.of(key).lastTold(); told != nil && *told == out.Summary() {
		// Only the counts changed: written a little later, with whatever
		// comes meanwhile, so that a burst of triggers costs the API
		// server one status write a second, not one per sync.
		c.statusQueue.AddAfter(key, countsDelay)
		return
	}
	c.statusQueue.Add(key)
}

// countsDelay is how long a status write that only changes counts waits.
const countsDelay = time.Second

// written ends the write of an outcome taken.
func (r *reports) written() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writing--
}

// writePending writes every outcome not yet written, delayed or not: a
// stopping controller does, once its status workers have stopped.
func (c *Controller) writePending(ctx context.Context) {
	c.reports.mu.Lock()
	pending := c.reports.pending
	c.reports.pending = nil
	c.reports.mu.Unlock()
	for key, p := range pending {
		if err := c.report(ctx, key, p.cp, p.out); err != nil {
			c.log.Error("status not written before stopping", "policy", key.String(), "error", err.Error())
		}
	}
}

// take removes and returns the outcome waiting for key.
func (r *reports) take(key policy.Key) (pendingReport, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pending[key]
	delete(r.pending, key)
	if ok {
		r.writing++
	}
	return p, ok
}

// putBack returns an outcome whose write failed, unless a newer one came.
func (r *reports) putBack(key policy.Key, p pendingReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writing--
	if _, newer := r.pending[key]; !newer {
		r.pending[key] = p
	}
}

// statusWorkers write the outcomes of syncs; two, so that one slow write
// does not hold up the other policies'.
const statusWorkers = 2

// statusDrainTimeout bounds how long a stopping controller spends writing
// the outcomes its last syncs left.
const statusDrainTimeout = 10 * time.Second

// runStatusWorker writes outcomes until the status queue shuts down and is
// drained.
func (c *Controller) runStatusWorker(ctx context.Context) {
	for {
		key, shutdown := c.statusQueue.Get()
		if shutdown {
			return
		}
		if p, ok := c.reports.take(key); ok {
			if err := c.report(ctx, key, p.cp, p.out); err != nil && ctx.Err() == nil && c.running(key, p.cp) {
				c.log.Error("status not written", "policy", key.String(), "error", err.Error())
				c.reports.putBack(key, p)
				c.statusQueue.AddRateLimited(key)
			} else {
				c.reports.written()
				c.states.of(key).tell(p.out.Summary())
				c.statusQueue.Forget(key)
			}
		}
		c.statusQueue.Done(key)
	}
}

// running reports whether cp's policy still runs: the outcome of a policy
// deleted since has nowhere to go, neither the policy nor its record.
func (c *Controller) running(key policy.Key, cp *policy.Compiled) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cur := c.policies[key]
	return cur != nil && cur.Policy.GetUID() == cp.Policy.GetUID()
}

// report writes the outcome of a sync to the policy's status and to its
// record's at the same time: two objects, each a request or none. The
// outcome of a policy deleted since is not written.
func (c *Controller) report(ctx context.Context, key policy.Key, cp *policy.Compiled, out outcome) error {
	if !c.running(key, cp) {
		return nil
	}
	var statusErr error
	var wg sync.WaitGroup
	wg.Go(func() { statusErr = c.reportStatus(ctx, c.freshest(key, cp), out) })
	recordErr := c.ledger.SaveStatus(ctx, key, cp, out, reconcileRequest(cp.Policy))
	wg.Wait()
	return errors.Join(statusErr, recordErr)
}

// freshest returns the running copy of cp's policy when it is the same
// generation: its status is the last the cache saw, so an outcome already
// written is not written again.
func (c *Controller) freshest(key policy.Key, cp *policy.Compiled) *policy.Compiled {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if cur := c.policies[key]; cur != nil && cur.Policy.GetUID() == cp.Policy.GetUID() && cur.Policy.GetGeneration() == cp.Policy.GetGeneration() {
		return cur
	}
	return cp
}
