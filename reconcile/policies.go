package reconcile

import (
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/sources"
)

// compiledPolicy is one generation of a policy, compiled. It is replaced, never
// changed, when the policy changes.
type compiledPolicy struct {
	// policy is the latest state of the policy (its status changes between
	// compilations); program was compiled from the same generation.
	policy   apiv1.Policy
	source   string
	revision string
	program  *celenv.Program
	// triggers are the resources the policy's resource rules name, resolved
	// through discovery.
	triggers []schema.GroupVersionResource
	// refused are resources the rules name that Sprout or the policy's
	// account may not list and watch: not watched, and waited for.
	refused []schema.GroupVersionResource
	// resolveErr says why some resource rules could not be resolved.
	resolveErr error
	// activated is when the policy began: triggers created since are admitted.
	activated time.Time
	criteria  criteria
	// selector is the label selector of its trigger informers
	// (pushedSelector), "" when they hold every object.
	selector string
	// operations are the operations the resource rules list.
	operations sets.Set[string]
	// derives are the triggers the policy's settings admit without a
	// record of each.
	derives sproutv1alpha1.DerivedAdmissions
	// evaluations are the program's results kept per trigger.
	evaluations *evaluations
	// decisions are the objects apply found unchanged, kept per object.
	decisions *inventory.Decisions
}

// derives reports whether settings d admit, without a record of it, a
// trigger created at created of a policy activated at activated.
func derives(d sproutv1alpha1.DerivedAdmissions, created, activated time.Time) bool {
	return d.GenerateExisting || d.Created && !created.Before(activated)
}

// compile turns a policy, with the program its source compiled, into a
// compiled policy: its match criteria, activation time and trigger
// resources. It never fails: errors are kept on the program and resolveErr.
func (c *Controller) compile(p sources.Policy) *compiledPolicy {
	cp := &compiledPolicy{
		policy:    p.Policy,
		source:    p.Source,
		revision:  p.Revision,
		program:   p.Program,
		activated: c.activation(p),

		evaluations: newEvaluations(),
		decisions:   inventory.NewDecisions(),
	}
	if mc := p.PolicySpec().MatchConstraints; mc != nil {
		cp.criteria = newCriteria(*mc)
		cp.operations = operationsFor(mc.ResourceRules)
		cp.derives = sproutv1alpha1.DerivedAdmissions{
			GenerateExisting: p.PolicySpec().GenerateExisting(),
			// Creation admits only where the rules list CREATE: a DELETE-only
			// policy generates from tombstones, never from live triggers.
			Created: cp.operations.Has("*") || cp.operations.Has(string(admission.Create)),
		}
		cp.triggers, cp.refused, cp.resolveErr = c.resolveRules(p.Policy)
		cp.selector = pushedSelector(cp)
	}
	return cp
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

func (cp *compiledPolicy) String() string {
	return fmt.Sprintf("%s (generation %d)", celenv.PolicyRef(cp.policy), cp.policy.GetGeneration())
}

// activation is when a policy began: its creationTimestamp in the cluster;
// for a policy from files, when its record says Sprout first ran it, or now.
func (c *Controller) activation(p sources.Policy) time.Time {
	if t := p.GetCreationTimestamp().Time; !t.IsZero() {
		return t
	}
	if rec := c.record(policy.KeyOf(p.Policy)); rec != nil && rec.Spec.Policy.UID == string(p.GetUID()) && rec.Spec.Activated != nil {
		return rec.Spec.Activated.Time
	}
	return time.Now().Truncate(time.Second)
}
