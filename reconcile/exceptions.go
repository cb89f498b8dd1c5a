package reconcile

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/reconcile/evaluate"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/sources"
)

// ReasonPolicySkipped is the Event reason, Kyverno's, of triggers a
// PolicyException skipped.
const ReasonPolicySkipped = "PolicySkipped"

// Exceptions takes the exceptions of a source (evaluate.TakeExceptions).
// The policies named by an exception that came, went or changed forget
// their set and are queued, to be evaluated again under the new one.
func (h policyHandler) Exceptions(source string, list []sources.Exception) {
	c := h.c
	named := c.eval.TakeExceptions(source, list)
	c.states.Each(func(key policy.Key, st *policyState) {
		if named(key) {
			st.Exceptions().Forget()
		}
	})
	var queue []policy.Key
	c.mu.Lock()
	for key := range c.policies {
		if named(key) {
			queue = append(queue, key)
		}
	}
	c.mu.Unlock()
	for _, key := range queue {
		c.queue.Add(key)
	}
}

// skip notes that exceptions skipped trigger t: its objects are kept, as
// Kyverno keeps them, and not pruned.
func (g *generation) skip(t policy.Trigger, exceptions []string) {
	if g.skipped == nil {
		g.skipped = evaluate.Skipped{}
	}
	g.skipped.Add(t, exceptions)
}

// skippedEvent tells, on the policy, which triggers exceptions skipped,
// once for each different set (evaluate.PolicyExceptions.Tell).
func (s *syncer) skippedEvent(key policy.Key, cp *policy.Compiled, skipped evaluate.Skipped) {
	msg, tell := s.states.Of(key).Exceptions().Tell(skipped, eventObjects)
	if !tell || s.dryRun {
		return
	}
	if ref := s.tell.Reference(key, cp); ref != nil {
		s.tell.Event(ref, corev1.EventTypeNormal, ReasonPolicySkipped, msg)
	}
}

// held are the triggers whose objects a prune keeps: those that failed and
// those exceptions skipped.
func (g *generation) held() sets.Set[string] {
	if len(g.skipped) == 0 {
		return g.failed
	}
	held := g.failed.Clone()
	for uid := range g.skipped {
		held.Insert(uid)
	}
	return held
}
