package reconcile

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// AccessReviews counts the access reviews the controller asked of the API
// server.
func (c *Controller) AccessReviews() int64 { return c.rights.Reviews().Asked() }

// PermissionRechecks counts the permission rechecks done; the first follows
// the start of the RBAC watch and asks every review again.
func (c *Controller) PermissionRechecks() int64 { return c.rights.RBAC().Rechecks() }

// CachedRelease reports whether the cache of the generated objects of gvr
// holds namespace/name, and whether it keeps it released: its version was
// paired with the create that made it as desired.
func (c *Controller) CachedRelease(gvr schema.GroupVersionResource, namespace, name string) (cached, released bool) {
	inf, ok := c.intake.generated.Informer(gvr)
	if !ok {
		return false, false
	}
	obj, ok, err := inf.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return false, false
	}
	_, released = obj.(*cluster.Object).Released()
	return true, released
}

// ConfirmationLooks counts the looks at objects first seen (ledger/confirm.go).
func (c *Controller) ConfirmationLooks() int64 { return c.ledger.ConfirmationLooks() }

// Dirty returns the triggers of policy (Kind/name or Kind/namespace/name)
// that events marked changed since its last sync.
func (c *Controller) Dirty(name string) []types.UID {
	key, _ := policy.ParseKey(name)
	return c.queue.MarkedTriggers(key)
}

// RecheckAfterStatusWrite rechecks policy's permissions as a recheck does
// whose snapshot a status write of the policy replaced before its answer
// came: the copy the write made is what the recheck must update. It reports
// whether the snapshot already watched resource, in which case nothing
// was left to find.
func (c *Controller) RecheckAfterStatusWrite(ctx context.Context, name, resource string) (snapshotWatched bool) {
	key, _ := policy.ParseKey(name)
	c.rights.Reviews().Invalidate()
	c.mu.Lock()
	cp := c.policies[key]
	if cp != nil {
		written := *cp
		c.policies[key] = &written
	}
	c.mu.Unlock()
	if cp == nil {
		return false
	}
	for _, gvr := range cp.Triggers {
		if gvr.Resource == resource {
			return true
		}
	}
	if c.recheckPolicy(ctx, key, cp) {
		c.intake.releaseInformers()
	}
	return false
}

// PolicyStateLeft counts, in each store the controller keeps by policy,
// the policies it holds: after every policy has left, each is 0.
func (c *Controller) PolicyStateLeft() map[string]int {
	out := map[string]int{"states": c.states.Len()}
	c.mu.RLock()
	out["policies"], out["deleted"] = len(c.policies), len(c.deleted)
	c.mu.RUnlock()
	count := func(name string, mu sync.Locker, n func() int) {
		mu.Lock()
		defer mu.Unlock()
		out[name] = n()
	}
	out["claims"] = c.ledger.Names().Len()
	out["reads"] = c.reads.Len()
	out["syncs"] = c.syncs.Len()
	out["dirty"] = c.queue.Marked()
	count("plans", &c.pipeline.planned.mu, func() int { return len(c.pipeline.planned.byKey) })
	out["reports"] = c.tell.Pending()
	return out
}

// RoundSeen counts the cached triggers the round under way of the policy
// named Kind/[namespace/]name has looked at so far; -1 when it is not
// running.
func (c *Controller) RoundSeen(name string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for key, cp := range c.policies {
		if key.String() == name {
			return cp.Evaluations.Seen()
		}
	}
	return -1
}

// AppliesStarted counts the goroutines the syncs' part applies started.
func (c *Controller) AppliesStarted() int64 { return c.pipeline.applies.Started() }
