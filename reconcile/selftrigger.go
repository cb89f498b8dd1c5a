package reconcile

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
)

// An object a policy generated is never a trigger of that same policy: a
// policy whose objects match its own rules would otherwise generate from
// them, and from what those generate, without end (bomb-a, bomb-bomb-a…).
// Its origin labels or its sprout.dev/policy annotation naming the policy
// mark such an object, but whoever writes a trigger can write those too,
// and would so take their trigger out of a platform's policy: the object
// must also be one the policy wrote (ownObjects), or, for a policy that
// does not synchronize, one its record says it generated for the trigger
// its label names. Removing the labels makes it the policy's claimed
// object (ownership.go), which a synchronizing policy labels again at
// once. Other policies still see it as a trigger: one policy's objects may
// trigger another's.

// labelledBy reports whether the cached trigger u says, by its labels or
// annotation, that cp's policy generated it.
func labelledBy(cp *compiledPolicy, u *cluster.Object) bool {
	p := cp.policy
	if u.Owner() == celenv.PolicyRef(p) {
		return true
	}
	l := u.OriginLabels()
	if l == nil {
		return false
	}
	ns := ""
	if p.IsNamespaced() {
		ns = p.GetNamespace()
	}
	return l[sproutv1alpha1.LabelManagedBy] == sproutv1alpha1.ManagedBy && l[sproutv1alpha1.LabelPolicyName] == sproutv1alpha1.LabelValue(p.GetName()) &&
		l[sproutv1alpha1.LabelPolicyNamespace] == ns
}

// generatedBy reports whether the policy wrote u, whose labels say so
// (labelledBy): it is among the objects the policy wrote while Sprout runs,
// or, for a policy that does not synchronize, among those its record says
// it generated for the trigger u's label names.
func (c *Controller) generatedBy(key policyKey, u *cluster.Object) bool {
	id := u.ID()
	if c.own.has(key, id) {
		return true
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.generated[key].Has(generatedID(id, u.TriggerUID()))
}

// ownObjects are, per policy whose generated resources are among its
// trigger resources, the objects it wrote while Sprout runs, by ID: what
// tells its own objects from triggers labelled as if they were. Other
// policies keep none, as they cannot trigger themselves.
type ownObjects struct {
	mu  sync.Mutex
	ids map[policyKey]map[string]struct{}
}

func (o *ownObjects) has(k policyKey, id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.ids[k][id]
	return ok
}

// note adds the objects changes show present, and takes out those deleted.
func (o *ownObjects) note(k policyKey, changes inventory.ChangeSet) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ids == nil {
		o.ids = map[policyKey]map[string]struct{}{}
	}
	set := o.ids[k]
	if set == nil {
		set = map[string]struct{}{}
		o.ids[k] = set
	}
	for _, ch := range changes.Changes {
		switch {
		case ch.Action == inventory.Deleted:
			delete(set, ch.ID)
		case ch.Action == inventory.Created || ch.Action == inventory.Unchanged || ch.Present():
			set[ch.ID] = struct{}{}
		}
	}
}

func (o *ownObjects) forget(k policyKey) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.ids, k)
}

// mayTriggerItself reports whether a policy writes to a resource it
// triggers on: only then can its objects be its triggers.
func (c *Controller) mayTriggerItself(key policyKey) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cp := c.policies[key]
	if cp == nil {
		return false
	}
	for _, gvr := range cp.triggers {
		if c.written[key].Has(gvr) {
			return true
		}
	}
	return false
}

// ReasonSelfTrigger is the reason of the Event that tells that objects a
// policy generated match its own rules, and are not its triggers.
const ReasonSelfTrigger = "SelfTrigger"

// reportSelfTriggers tells, in the log and with an Event on the policy,
// how many of its own objects a sync of it passed over as triggers, each
// time that count changes.
func (c *Controller) reportSelfTriggers(key policyKey, cp *compiledPolicy, n int) {
	if !c.states.of(key).passedOver(n) || n == 0 || c.opts.DryRun {
		return
	}
	msg := fmt.Sprintf("%d objects this policy generated match its own rules: they are not its triggers, so it does not generate from what it generated", n)
	c.log.Info("objects a policy generated are not its triggers", "policy", key.String(), "objects", n)
	if ref := c.policyReference(key, cp); ref != nil {
		c.events.Event(ref, corev1.EventTypeWarning, ReasonSelfTrigger, msg)
	}
}
