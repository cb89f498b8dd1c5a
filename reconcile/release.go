package reconcile

import (
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/sources"
)

// Sharding: a policy that leaves this replica's selection (its labels
// changed, sources.Handler.Release) is another shard's from then on. It is
// released, not deleted: its sync under way stops, nothing is pruned, its
// record and its objects stay as they are for the shard that selects it
// now, which resumes from the record as a restart does and so writes
// nothing where the objects are as desired. Its status is no longer
// written here, and its informers, metrics and memory go.

// Release forgets a policy that left this shard's selection.
func (h policyHandler) Release(p sources.Policy) {
	c := h.c
	key := policy.KeyOf(p.Policy)
	if !h.unclaim(key, p) {
		return
	}
	c.mu.Lock()
	delete(c.policies, key)
	c.mu.Unlock()
	c.stopRunning(key)
	c.forgetPolicy(key)
	c.log.Info("policy released: it left this shard's selection; its objects and record stay for the shard that selects it", "policy", key.String(), "source", p.Source)
}

// unclaim withdraws p's source's copy of the policy. It reports whether
// that copy was the one running and no other source's copy takes over (a
// copy taking over is upserted).
func (h policyHandler) unclaim(key policy.Key, p sources.Policy) bool {
	c := h.c
	c.tell.Sources().Changed(c.ledger.Names().Sources(key)...)
	next, held, promoted := c.ledger.Names().Release(key, p.Source)
	if !held {
		return false // a shadowed copy went; the running one stays
	}
	if promoted {
		c.log.Info("policy name conflict resolved: the next source takes over", "policy", key.String(), "source", next.Source)
		h.Upsert(next)
		return false
	}
	return true
}

// stopRunning forgets what events taught about a policy that no longer
// runs and stops its sync under way, which then writes nothing more.
func (c *Controller) stopRunning(key policy.Key) {
	c.states.Of(key).ForgetEvents()
	c.stopSync(key)
}

// forgetPolicy drops what this replica kept of a policy it no longer
// runs: its metrics, what it wrote, its caches' interest. Should the
// policy come back, its record tells it all again.
func (c *Controller) forgetPolicy(key policy.Key) {
	c.metrics.Forget(key.String())
	c.states.Drop(key)
	c.reads.Drop(key)
	c.intake.releaseInformers()
}

// otherShards reports whether source holds the policy but leaves it out of
// this shard's selection: its record is another shard's, not an orphan.
func (c *Controller) otherShards(source string, key policy.Key) bool {
	s, ok := c.source(source).(sources.Selective)
	if !ok {
		return false
	}
	c.mu.RLock()
	ctx := c.ctx
	c.mu.RUnlock()
	return s.Unselected(ctx, key.Kind, key.Namespace, key.Name)
}

// source returns the configured source of that name.
func (c *Controller) source(name string) sources.Source {
	for _, s := range c.opts.Sources {
		if s.Name() == name {
			return s
		}
	}
	return nil
}
