package reconcile

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
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
func labelledBy(cp *policy.Compiled, u *cluster.Object) bool {
	p := cp.Policy
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
func (c *Controller) generatedBy(key policy.Key, u *cluster.Object) bool {
	id := u.ID()
	if c.states.of(key).owns(id) {
		return true
	}
	return c.states.of(key).hasGenerated(generatedID(id, u.TriggerUID()))
}

// mayTriggerItself reports whether a policy writes to a resource it
// triggers on: only then can its objects be its triggers.
func (c *Controller) mayTriggerItself(key policy.Key) bool {
	c.mu.RLock()
	cp := c.policies[key]
	c.mu.RUnlock()
	if cp == nil {
		return false
	}
	written := c.states.of(key).writtenTo()
	for _, gvr := range cp.Triggers {
		if written.Has(gvr) {
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
func (c *Controller) reportSelfTriggers(key policy.Key, cp *policy.Compiled, n int) {
	if !c.states.of(key).passedOver(n) || n == 0 || c.opts.DryRun {
		return
	}
	msg := fmt.Sprintf("%d objects this policy generated match its own rules: they are not its triggers, so it does not generate from what it generated", n)
	c.log.Info("objects a policy generated are not its triggers", "policy", key.String(), "objects", n)
	if ref := c.tell.Reference(key, cp); ref != nil {
		c.tell.Event(ref, corev1.EventTypeWarning, ReasonSelfTrigger, msg)
	}
}
