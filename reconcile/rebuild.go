package reconcile

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// A policy's record holds what Sprout cannot see in the cluster: which
// triggers it admitted, and, for a policy from files, when it began. A
// record lost (deleted by someone, while Sprout ran or not) must never make
// Sprout prune what the policy generated for triggers it still matches.
//
// A record deleted while Sprout runs queues its policy, whose sync writes
// it again from memory. A policy that starts without a record is
// rebuilding: it prunes nothing until its objects, found by their labels
// in the resources it writes to, have told which triggers it generated
// for. Those are admitted again, and a policy from files begins again at
// the earliest of them. The record says so with LabelRebuilding until
// then, so that a restart in between rebuilds again rather than trusting a
// record written from nothing.

// LabelRebuilding marks the record of a policy whose admissions are being
// rebuilt from its objects; it prunes nothing meanwhile.
const LabelRebuilding = "sprout.dev/rebuilding"

// rebuildAdmissions reads, from the objects the policy owns in the
// resources it has written to so far, the triggers it generated for, and
// admits those that still exist and that its settings do not admit. A
// policy without a creationTimestamp (from files) begins, at the latest,
// when the earliest of them was created. It returns the policy, changed
// when its beginning did, and whether anything was learnt.
func (c *Controller) rebuildAdmissions(key policy.Key, cp *policy.Compiled) (*policy.Compiled, bool) {
	owned, err := c.owned(key)
	if err != nil || len(owned) == 0 {
		return cp, false
	}
	created := c.triggerCreation(cp)
	var named []types.UID
	earliest := cp.Activated
	for _, o := range inventory.Proven(owned) { // copied labels tell nothing
		uid := types.UID(o.TriggerUID())
		t, ok := created[uid]
		if !ok {
			continue // gone: its objects go the usual way
		}
		named = append(named, uid)
		if t.Before(earliest) {
			earliest = t
		}
	}
	learnt := false
	if cp.Policy.GetCreationTimestamp().Time.IsZero() && earliest.Before(cp.Activated) {
		next := *cp
		next.Activated = earliest
		c.mu.Lock()
		if c.policies[key] == cp {
			c.policies[key] = &next
		}
		c.mu.Unlock()
		c.log.Info("policy's beginning rebuilt from its objects", "policy", key.String(), "activated", earliest)
		cp, learnt = &next, true
	}
	admitted := 0
	for _, uid := range named {
		if !policy.Derived(cp.Derives, created[uid], cp.Activated) && !c.states.of(key).isAdmitted(uid) {
			c.states.of(key).admit(uid)
			admitted++
		}
	}
	if admitted > 0 {
		c.log.Info("policy's admissions rebuilt from its objects", "policy", key.String(), "triggers", admitted)
	}
	return cp, learnt || admitted > 0
}

// triggerCreation maps the UID of every cached trigger of the policy's
// resources to when it was created.
func (c *Controller) triggerCreation(cp *policy.Compiled) map[types.UID]time.Time {
	out := map[types.UID]time.Time{}
	c.eachCachedTrigger(cp, func(o *cluster.Object) { out[o.GetUID()] = o.Created() })
	return out
}

// recordDeleted queues the policy whose record, or a shard of it, was
// deleted: its sync writes it again.
func (c *Controller) recordDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	var key policy.Key
	key.Kind, _, _ = unstructured.NestedString(u.Object, "spec", "policy", "kind")
	key.Namespace, _, _ = unstructured.NestedString(u.Object, "spec", "policy", "namespace")
	key.Name, _, _ = unstructured.NestedString(u.Object, "spec", "policy", "name")
	c.mu.RLock()
	_, running := c.policies[key]
	c.mu.RUnlock()
	if running {
		c.log.Info("record deleted: written again", "policy", key.String(), "record", u.GetName())
		c.queue.Add(key)
	}
}
