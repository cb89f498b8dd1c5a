package reconcile

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/cluster"
)

// AccessReviews counts the access reviews the controller asked of the API
// server.
func (c *Controller) AccessReviews() int64 { return c.access.reviews.Load() }

// PermissionRechecks counts the permission rechecks done; the first follows
// the start of the RBAC watch and asks every review again.
func (c *Controller) PermissionRechecks() int64 { return c.rechecked.Load() }

// CachedRelease reports whether the cache of the generated objects of gvr
// holds namespace/name, and whether it keeps it released: its version was
// paired with the create that made it as desired.
func (c *Controller) CachedRelease(gvr schema.GroupVersionResource, namespace, name string) (cached, released bool) {
	c.mu.RLock()
	ti := c.downstream[gvr]
	c.mu.RUnlock()
	if ti == nil {
		return false, false
	}
	obj, ok, err := ti.informer.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return false, false
	}
	_, released = obj.(*cluster.Object).Released()
	return true, released
}

// Dirty returns the triggers of policy (Kind/name or Kind/namespace/name)
// that events marked changed since its last sync.
func (c *Controller) Dirty(policy string) []types.UID {
	key, _ := parsePolicyKey(policy)
	c.queue.dirty.mu.Lock()
	defer c.queue.dirty.mu.Unlock()
	var out []types.UID
	if p := c.queue.dirty.m[key]; p != nil {
		for uid := range p.triggers {
			out = append(out, uid)
		}
	}
	return out
}
