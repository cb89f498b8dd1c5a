package reconcile

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/policyreport"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// newPolicyReports returns the writer of the controller's PolicyReports, or
// nil when they are off or the controller only plans. It writes with a
// client of its own, so that its writes never take from the rate limit of
// the generated objects', and between syncs (yield).
func newPolicyReports(cfg *rest.Config, opts Options, yield func(context.Context)) (*policyreport.Writer, error) {
	if opts.PolicyReports == nil || opts.DryRun {
		return nil, nil
	}
	o := *opts.PolicyReports
	o.Logger = opts.Logger
	o.Yield = yield
	return policyreport.NewWriter(cfg, o)
}

// reportTrigger hands the result of a policy's evaluation for trigger t to
// the report writer, as Kyverno reports it: an error, a skip for an
// excepted trigger, nothing for a trigger the matchConditions skip, and a
// pass otherwise. A tombstone's evaluation is not reported: its report
// goes with it.
func (c *Controller) reportTrigger(cp *policy.Compiled, t policy.Trigger, ev policy.Evaluation, err error) {
	if c.policyReports == nil || t.Deleted || !policyreport.Reported(cp.Policy) {
		return
	}
	tr, name := policyreport.TriggerOf(t.Object), policyreport.PolicyName(cp.Policy)
	switch {
	case err != nil:
		c.policyReports.Set(tr, name, policyreport.Error(cp.Policy, err))
	case len(ev.Excepted) > 0:
		c.policyReports.Set(tr, name, policyreport.Excepted(cp.Policy, ev.Excepted, ev.ExceptedResult))
	case !ev.Matched:
		c.policyReports.Set(tr, name, nil)
	default:
		c.policyReports.Set(tr, name, policyreport.Pass(cp.Policy, ev.Audit, ev.Objects))
	}
}

// reportFailed reports, for the triggers of part in failed (by UID), the
// error that kept their objects from being written: an apply that failed
// is the trigger's error, as in Kyverno, not the pass its evaluation gave.
func (c *Controller) reportFailed(cp *policy.Compiled, part []policy.Trigger, failed map[string]error) {
	if len(failed) == 0 || c.policyReports == nil {
		return
	}
	for _, t := range part {
		if err, ok := failed[string(t.Object.GetUID())]; ok {
			c.reportTrigger(cp, t, policy.Evaluation{}, err)
		}
	}
}

// reportsToggled reports whether a policy's results were turned on or off
// (Kyverno's label reports.kyverno.io/disabled) between two copies of one
// generation: a label is no new generation.
func reportsToggled(was, now metav1.Object) bool {
	return policyreport.Reported(was) != policyreport.Reported(now)
}

// unreportUnmatched removes, once a full sync matched the policy's
// triggers, its results from the reports of the triggers it no longer
// matches, as Kyverno's reports hold results only for the policies that
// match: a trigger whose labels or namespace left the policy's selectors,
// or a policy whose match narrowed or that reports turned off. A trigger
// whose match failed keeps its result; so do all when a trigger resource
// could not be read, as which triggers match is then unknown.
func (c *Controller) unreportUnmatched(run *syncRun) {
	if c.policyReports == nil || run.cp.ResolveErr != nil {
		return
	}
	name := policyreport.PolicyName(run.cp.Policy)
	if !policyreport.Reported(run.cp.Policy) {
		c.policyReports.DropPolicy(name)
		return
	}
	keep := sets.New(run.unmatched...)
	for _, t := range run.triggers {
		keep.Insert(t.Object.GetUID())
	}
	c.policyReports.Retain(name, keep.Has)
}

// unreportDirty removes, in an incremental sync, the policy's results from
// the reports of the changed triggers it no longer matches.
func (c *Controller) unreportDirty(cp *policy.Compiled, dirty []types.UID, matched []policy.Trigger) {
	if c.policyReports == nil {
		return
	}
	keep := sets.New[types.UID]()
	for _, t := range matched {
		keep.Insert(t.Object.GetUID())
	}
	name := policyreport.PolicyName(cp.Policy)
	for _, uid := range dirty {
		if !keep.Has(uid) {
			c.policyReports.Unset(uid, name)
		}
	}
}
