package reconcile

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/queue"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// watchKey names one trigger informer (watches.Key).
type watchKey = watches.Key

// watchKeyOf is the unfiltered informer that serves gvr to policies of
// scope: a cluster-scoped resource has one, whatever the scope.
func (in *intake) watchKeyOf(scope string, gvr schema.GroupVersionResource) watchKey {
	if scope == "" {
		return watchKey{GVR: gvr} // every event asks for every policy
	}
	if namespaced, known := in.kinds.Namespaced(gvr); known && !namespaced {
		return watchKey{GVR: gvr}
	}
	return watchKey{GVR: gvr, Namespace: scope}
}

// watches reports whether the policy is served by informer w, for its
// triggers or for what its last sync read. The caller holds the policies' lock.
func (in *intake) watches(key policy.Key, cp *policy.Compiled, w watchKey) bool {
	return in.triggeredBy(cp, w) || in.readsFrom(key, cp, w)
}

// needNamespaces starts the Namespace cache, which namespaced triggers
// need (namespaceSelector, namespaceObject); starting it again is a no-op.
// Once it has listed, the policies whose sync waited for a cache are
// queued, as a trigger list's end queues those it serves: nothing else
// would wake them before their back-off.
func (in *intake) needNamespaces() {
	in.informers.Start(in.ctx.Done())
	in.namespacesListed.Do(func() {
		listed := in.informers.Core().V1().Namespaces().Informer().HasSynced
		go func() {
			if waitSynced(in.ctx, listed) {
				in.queueWaiting(func(policy.Key, *policy.Compiled) bool { return true })
			}
		}()
	})
}

// queueWaiting queues the running policies that waits picks whose last
// sync waited for a cache.
func (in *intake) queueWaiting(waits func(policy.Key, *policy.Compiled) bool) {
	in.policies(false, func(running map[policy.Key]*policy.Compiled) {
		for key, cp := range running {
			if waits(key, cp) && in.states.Of(key).Waiting() {
				in.queue.Add(key)
			}
		}
	})
}

// namespacesSynced reports whether the Namespace cache is ready for a
// policy's triggers: it need not be when none is namespaced.
func (in *intake) namespacesSynced(triggers []schema.GroupVersionResource) bool {
	for _, gvr := range triggers {
		if namespaced, _ := in.kinds.Namespaced(gvr); namespaced {
			return in.informers.Core().V1().Namespaces().Informer().HasSynced()
		}
	}
	return true
}

// ensureInformers starts the informers of keys not running yet.
func (in *intake) ensureInformers(keys ...watchKey) {
	for _, w := range keys {
		if namespaced, known := in.kinds.Namespaced(w.GVR); namespaced || !known {
			in.needNamespaces() // namespaced, or not known to be cluster-scoped
			break
		}
	}
	in.triggers.Ensure(keys...)
}

// releaseInformers stops the informers no policy needs any more: trigger
// and source informers no policy's rules or reads name, downstream
// informers of resources no policy, running or being cleaned up, wrote to.
func (in *intake) releaseInformers() {
	// Exclusive: no policy enters or leaves while the informers it needs
	// are counted and the others stopped.
	in.policies(true, func(running map[policy.Key]*policy.Compiled) {
		needed := sets.New[watchKey]()
		for key, cp := range running {
			needed.Insert(in.triggerKeys(cp)...)
			for gvr := range in.states.Of(key).Reads() {
				needed.Insert(in.watchKeyOf(cp.Scope(), gvr))
			}
		}
		in.triggers.Release(needed)
		written := sets.New[schema.GroupVersionResource]()
		in.states.Each(func(_ policy.Key, st *policyState) {
			written = written.Union(st.Ledger().Written())
		})
		in.generated.Release(written)
	})
}

// Watched lists the resources the controller watches for triggers and
// clone sources, each once whatever the selectors of its informers, and
// for generated objects, as resource.version.group.
func (c *Controller) Watched() (triggers, generated []string) {
	watched := sets.New[string]()
	for _, w := range c.intake.triggers.Keys() {
		watched.Insert(w.Resource())
	}
	for gvr := range c.intake.generated.Sizes() {
		generated = append(generated, watches.ResourceName(gvr))
	}
	slices.Sort(generated)
	return sets.List(watched), generated
}

func (in *intake) stopTriggerInformers() {
	in.triggers.StopAll()
	in.generated.StopAll()
}

// triggerEvents hands the trigger informers' events to the intake.
type triggerEvents struct{ in *intake }

func (e triggerEvents) Event(w watchKey, op admission.Operation, obj, old *cluster.Object) {
	e.in.onTrigger(w, op, obj, old)
}

func (e triggerEvents) Listed(w watchKey) { e.in.queueWatching(w) }

// onTrigger replays an informer event as the admission event a webhook would
// have seen. A CREATE or UPDATE that a policy's rules select admits the
// trigger for that policy, if w serves the policy's triggers; every event
// queues the policies w serves. op is empty for objects that existed
// before Sprout started watching.
func (in *intake) onTrigger(w watchKey, op admission.Operation, o, old *cluster.Object) {
	gvr := w.GVR
	var interested, triggered []*policy.Compiled
	read := sets.New[policy.Key]() // the policies that read gvr
	in.policies(false, func(running map[policy.Key]*policy.Compiled) {
		for key, cp := range running {
			switch {
			case in.triggeredBy(cp, w):
				triggered = append(triggered, cp)
				interested = append(interested, cp)
			case in.readsFrom(key, cp, w):
				interested = append(interested, cp)
			}
			if in.states.Of(key).ReadsFrom(gvr) {
				read.Insert(key)
			}
		}
	})
	in.rememberUpdate(w, triggered, op, o, old)
	if op == admission.Delete {
		in.tell.TriggerGone(o, w.Selector != "", triggered)
	}
	var labelled *metav1.PartialObjectMetadata // decoded once, if a selector reads labels
	for _, cp := range interested {
		key := policy.KeyOf(cp.Policy)
		if cp.Policy.IsNamespaced() && o.GetNamespace() != cp.Policy.GetNamespace() {
			continue // confined to its namespace: it never sees another's triggers
		}
		if op != "" && cp.Admission && slices.Contains(triggered, cp) {
			labelled = in.admit(key, cp, gvr, op, o, labelled)
		}
		in.queueTrigger(key, cp, gvr, read.Has(key), op, o, old)
	}
}

// admit replays event op on o for a policy whose rules o's resource
// matches: a DELETE its rules select leaves a tombstone, a CREATE or
// UPDATE admits o, and an UPDATE has a policy that applies its objects on
// updates (reappliesOnUpdate) apply them again. labelled is o's metadata
// with its labels, decoded once for every policy: it returns it.
func (in *intake) admit(key policy.Key, cp *policy.Compiled, gvr schema.GroupVersionResource, op admission.Operation, o *cluster.Object, labelled *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	crit := cp.Listed(cp.Criteria.Events) // o is from the informer of cp's triggers
	sel := labelled
	if !crit.ReadsLabels() {
		sel = o.Selectable(false)
	} else if sel == nil {
		labelled = o.Selectable(true)
		sel = labelled
	}
	ok, err := in.eval.Match(crit, gvr, op, o.GroupVersionKind(), sel)
	if err != nil || !ok || generatedByPolicies(cp, o) {
		return labelled
	}
	st := in.states.Of(key)
	if op == admission.Delete {
		st.AddTombstone(policy.Trigger{GVR: gvr, Object: o, Deleted: true})
		return labelled
	}
	if op == admission.Update && reappliesOnUpdate(cp) {
		st.Updated(o.GetUID())
	}
	order := st.Ledger().Order(cp, o.GetUID(), o.Created(), o.GetResourceVersion())
	if order == policy.Before {
		st.Ledger().Predate(o.GetUID())
		if op == admission.Create {
			return labelled // created before the policy, seen late: no event of the policy's
		}
	}
	if !policy.Derived(cp.Derives, o.Created(), cp.Activated, order) {
		st.Ledger().Admit(o.GetUID())
	}
	return labelled
}

// reappliesOnUpdate reports whether a policy applies a trigger's objects
// again at each UPDATE of it, as Kyverno does with useServerSideApply
// and without synchronize: the policy's fields are put back, and the
// fields other managers own kept. A synchronizing policy keeps its objects
// as it wants them at every sync anyway.
func reappliesOnUpdate(cp *policy.Compiled) bool {
	spec := cp.Policy.PolicySpec()
	return spec.UseServerSideApply && !spec.Synchronize()
}

// queueTrigger queues a policy for an event on o: for that trigger, and,
// when the policy's evaluations read gvr, for the triggers that read o
// (deps.go), or in full when those are not known.
func (in *intake) queueTrigger(key policy.Key, cp *policy.Compiled, gvr schema.GroupVersionResource, read bool, op admission.Operation, o, prev *cluster.Object) {
	isTrigger := slices.Contains(cp.Triggers, gvr)
	if read && !in.queueReaders(key, gvr, o, prev) || !read && !isTrigger {
		in.queue.Add(key)
		return
	}
	if !isTrigger {
		return
	}
	d := queue.Change{GVR: gvr, Key: objectRef(o)}
	switch {
	case op == admission.Delete:
		d.Old = o
	case prev != nil:
		d.Old = prev
	}
	in.queue.AddTrigger(key, o.GetUID(), d, 0)
}

// queueWatching queues the policies that informer w serves, for triggers
// or reads, whose last sync waited for a cache: w may be it. Not the one
// whose sync took w's list as it came: that sync matches all of it, and
// another would match every trigger again, for nothing.
func (in *intake) queueWatching(w watchKey) {
	in.queueWaiting(func(key policy.Key, cp *policy.Compiled) bool { return in.watches(key, cp, w) })
}

// rememberUpdate keeps the state before an UPDATE for the policies that
// read oldObject or request; any other event forgets it.
func (in *intake) rememberUpdate(w watchKey, triggered []*policy.Compiled, op admission.Operation, o, prev *cluster.Object) {
	if op != admission.Update || prev == nil || !slices.ContainsFunc(triggered, func(cp *policy.Compiled) bool { return cp.Program.ReadsEvent() }) {
		in.triggers.SetLastUpdate(w, o.GetUID(), nil)
		return
	}
	in.triggers.SetLastUpdate(w, o.GetUID(), prev)
}

// lastUpdate returns the state of a trigger before its last UPDATE, or nil.
func (in *intake) lastUpdate(w watchKey, uid types.UID) *cluster.Object {
	return in.triggers.LastUpdate(w, uid)
}

// readCache returns the synced cache of gvr that serves the reads of
// policies confined to scope, starting its informer if needed.
func (in *intake) readCache(ctx context.Context, scope string, gvr schema.GroupVersionResource) (cache.Store, error) {
	w := in.watchKeyOf(scope, gvr)
	// Its informer runs as Sprout: one that may not list would fail for
	// ever. The read fails instead, and RBACPermissionsGranted says why.
	if err := in.rights.Reviews().MayWatch(ctx, nil, gvr, w.Namespace); err != nil {
		return nil, err
	}
	in.ensureInformers(w)
	store, ok := in.triggers.WaitListed(ctx, w)
	switch {
	case ok:
		return store, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s: cache did not sync: %w", resourceName(gvr), ctx.Err())
	}
	return nil, fmt.Errorf("%s: informer released while reading", resourceName(gvr))
}

// resourceName spells a resource as kubectl does: resource.version.group.
func resourceName(gvr schema.GroupVersionResource) string { return watches.ResourceName(gvr) }
