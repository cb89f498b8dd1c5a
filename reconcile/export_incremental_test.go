package reconcile

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// Idle reports whether no policy is queued or syncing and no status waits
// to be written or is being written.
func (c *Controller) Idle() bool {
	syncing := c.syncs.Len()
	return syncing == 0 && c.tell.Idle() && c.queue.Len() == 0 && c.queue.Taken() == 0
}

// SyncsIdle reports whether no policy is queued or syncing, whatever
// waits to be written to status.
func (c *Controller) SyncsIdle() bool {
	syncing := c.syncs.Len()
	return syncing == 0 && c.queue.Len() == 0 && c.queue.Taken() == 0
}

// ResyncAll queues every policy for a full sync, as a scheduled resync
// does, without forgetting what was decided or settled.
func (c *Controller) ResyncAll() { c.requeueAll() }

// CachedVersions returns, by name, the resourceVersions the controller's
// caches hold of the objects of gvr in namespace ("" for cluster-scoped
// ones), which a sync compares with before it writes: the running copies
// of GeneratingPolicies, the records, the Namespaces, or the objects in
// every informer on gvr, one version per informer that holds the object.
func (c *Controller) CachedVersions(gvr schema.GroupVersionResource, namespace string) map[string][]string {
	out := map[string][]string{}
	switch gvr {
	case apiv1.GeneratingPolicies:
		c.mu.RLock()
		for key, cp := range c.policies {
			if key.Kind == apiv1.GeneratingPolicyKind {
				out[key.Name] = append(out[key.Name], cp.Policy.GetResourceVersion())
			}
		}
		c.mu.RUnlock()
		return out
	case sproutv1alpha1.PolicyInventories:
		recs := c.ledger.Records()
		for _, rec := range recs {
			out[rec.Name] = append(out[rec.Name], rec.ResourceVersion)
		}
		return out
	case corev1.SchemeGroupVersion.WithResource("namespaces"):
		nss, _ := c.intake.informers.Core().V1().Namespaces().Lister().List(labels.Everything())
		for _, ns := range nss {
			out[ns.Name] = append(out[ns.Name], ns.ResourceVersion)
		}
		return out
	}
	var stores []cache.Store
	if inf, ok := c.intake.generated.Informer(gvr); ok {
		stores = append(stores, inf.GetStore())
	}
	for _, wk := range c.intake.triggers.Keys() {
		if store, _ := c.intake.triggers.Store(wk); wk.GVR == gvr && store != nil {
			stores = append(stores, store)
		}
	}
	for _, store := range stores {
		for _, obj := range store.List() {
			if o, ok := obj.(*cluster.Object); ok && o.GetNamespace() == namespace {
				out[o.GetName()] = append(out[o.GetName()], o.GetResourceVersion())
			}
		}
	}
	return out
}

// StaleReporter takes the running copy of the cluster policy name as it is
// now, and returns a function that writes the status of a sync that counted
// triggers and objects, compared with that copy, as the status worker does
// for a sync that began before the cache saw the last status write.
func (c *Controller) StaleReporter(name string) func(ctx context.Context, triggers, objects int) error {
	c.mu.RLock()
	cp := c.policies[policy.Key{Kind: apiv1.GeneratingPolicyKind, Name: name}]
	c.mu.RUnlock()
	return func(ctx context.Context, triggers, objects int) error {
		return c.tell.Status(ctx, cp, outcome{Triggers: triggers, Objects: objects})
	}
}
