package reconcile

import (
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/blast"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/sources"
)

// compile turns a policy, with the program its source compiled, into a
// compiled policy: its match criteria, activation time and trigger
// resources. It never fails: errors are kept on the program and resolveErr.
// cur is the generation running before, resolved p resolved already, if any.
func (c *Controller) compile(p sources.Policy, cur, resolved *policy.Compiled) *policy.Compiled {
	cp := resolved
	if cp == nil {
		cp = c.resolve(p)
	}
	cp.Activated, cp.ActivatedVersion = c.activation(p, cur)
	return cp
}

// resolve is compile but for the activation, which reads the record.
func (c *Controller) resolve(p sources.Policy) *policy.Compiled {
	cp := &policy.Compiled{
		Policy:   p.Policy,
		Source:   p.Source,
		Revision: p.Revision,
		Content:  blast.Revision(p.Policy),
		Program:  p.Program,

		Evaluations: policy.NewEvaluations(),
		Decisions:   inventory.NewDecisions(),
	}
	if mc := p.PolicySpec().MatchConstraints; mc != nil {
		cp.Criteria = policy.NewCriteria(*mc)
		cp.Operations = operationsFor(mc.ResourceRules)
		cp.Admission = p.PolicySpec().AdmissionEnabled()
		existing := p.PolicySpec().GenerateExisting()
		cp.Derives = sproutv1alpha1.DerivedAdmissions{
			GenerateExisting: existing && cp.Admission,
			// Creation admits only where the rules list CREATE: a DELETE-only
			// policy generates from tombstones, never from live triggers.
			Created: cp.Admission && (cp.Operations.Has("*") || cp.Operations.Has(string(admission.Create))),
			// Without admission, as in Kyverno, only generateExisting
			// generates: for the triggers that were there before the policy.
			Existing: existing && !cp.Admission,
		}
		cp.Triggers, cp.Refused, cp.ResolveErr = c.rights.Resolve(c.ctx, p.Policy)
		cp.Selector = policy.PushedSelector(cp)
	}
	return cp
}

// watchAhead resolves a policy delivered while the records are read and
// starts its trigger informers (and the Namespace cache): neither reads a
// record, and its first sync waits for their lists. It returns the policy
// resolved, nil if not; one then not taken releases them.
func (c *Controller) watchAhead(p sources.Policy) *policy.Compiled {
	if c.opts.DryRun || p.Program == nil || p.PolicySpec().MatchConstraints == nil {
		return nil
	}
	cp := c.resolve(p)
	if keys := c.intake.triggerKeys(cp); len(keys) > 0 {
		c.intake.ensureInformers(keys...)
	}
	return cp
}

// keepGeneratedOnSyncOff has a policy whose synchronize is switched off
// (cur, its running generation, synchronizes; next does not) remember the
// objects it owns now as generated, before its first sync without
// synchronize: one deleted meanwhile stays deleted, as Kyverno's does.
func (c *Controller) keepGeneratedOnSyncOff(key policy.Key, cur, next *policy.Compiled) {
	if cur == nil || cur.Policy.GetUID() != next.Policy.GetUID() ||
		!cur.Policy.PolicySpec().Synchronize() || next.Policy.PolicySpec().Synchronize() {
		return
	}
	if err := c.ledger.NoteOwned(key); err != nil {
		c.log.Error("objects of a policy whose synchronize is switched off not all listed: one deleted before its next sync is generated again",
			"policy", key.String(), "error", err.Error())
	}
}

// operationsFor lists the operations the resource rules name.
func operationsFor(rules []admissionregistrationv1.NamedRuleWithOperations) sets.Set[string] {
	ops := sets.New[string]()
	for _, r := range rules {
		for _, op := range r.Operations {
			ops.Insert(string(op))
		}
	}
	return ops
}

// activation is when a policy began, and its resourceVersion then where
// known: what the generation running before (cur) says, or the policy's
// record; else its creationTimestamp in the cluster, with the version of
// its creation if its source can tell it (sources.Policy.CreatedVersion);
// for a policy from files, when its record says Sprout first ran it, or
// now, and no version.
func (c *Controller) activation(p sources.Policy, cur *policy.Compiled) (time.Time, string) {
	if cur != nil && cur.Policy.GetUID() == p.GetUID() {
		return cur.Activated, cur.ActivatedVersion
	}
	rec := c.ledger.Record(policy.KeyOf(p.Policy))
	if rec != nil && rec.Spec.Policy.UID != string(p.GetUID()) {
		rec = nil
	}
	if t := p.GetCreationTimestamp().Time; !t.IsZero() {
		if rec != nil {
			return t, rec.Spec.ActivatedVersion
		}
		return t, p.CreatedVersion
	}
	if rec != nil && rec.Spec.Activated != nil {
		return rec.Spec.Activated.Time, ""
	}
	return time.Now().Truncate(time.Second), ""
}

// withPolicies runs f with the running policies under their lock, held
// exclusively when exclusive: how the intake reads them.
func (c *Controller) withPolicies(exclusive bool, f func(map[policy.Key]*policy.Compiled)) {
	if exclusive {
		c.mu.Lock()
		defer c.mu.Unlock()
	} else {
		c.mu.RLock()
		defer c.mu.RUnlock()
	}
	f(c.policies)
}
