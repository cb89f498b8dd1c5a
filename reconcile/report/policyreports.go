package report

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/policyreport"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// RunReports reads the PolicyReports Sprout wrote before it started, so
// that a restart writes none whose results did not change, then writes
// them until ctx is done. The first syncs do not wait for the read.
func (t *Teller) RunReports(ctx context.Context) {
	if t.reports != nil {
		t.reports.Run(ctx)
	}
}

// Trigger hands the result of a policy's evaluation for trigger tr to
// the report writer, as Kyverno reports it: an error, a skip for an
// excepted trigger, nothing for a trigger the matchConditions skip, and a
// pass otherwise. A tombstone's evaluation is not reported: its report
// goes with it.
func (t *Teller) Trigger(cp *policy.Compiled, tr policy.Trigger, ev policy.Evaluation, err error) {
	if t.reports == nil || tr.Deleted || !policyreport.Reported(cp.Policy) {
		return
	}
	trigger, name := policyreport.TriggerOf(tr.Object), policyreport.PolicyName(cp.Policy)
	switch {
	case err != nil:
		t.reports.Set(trigger, name, policyreport.Error(cp.Policy, err))
	case len(ev.Excepted) > 0:
		t.reports.Set(trigger, name, policyreport.Excepted(cp.Policy, ev.Excepted, ev.ExceptedResult))
	case !ev.Matched:
		t.reports.Set(trigger, name, nil)
	default:
		t.reports.Set(trigger, name, policyreport.Pass(cp.Policy, ev.Audit, ev.Objects))
	}
}

// ApplyFailed reports, for the triggers of part in failed (by UID), the
// error that kept their objects from being written: an apply that failed
// is the trigger's error, as in Kyverno, not the pass its evaluation gave.
func (t *Teller) ApplyFailed(cp *policy.Compiled, part []policy.Trigger, failed map[string]error) {
	if len(failed) == 0 || t.reports == nil {
		return
	}
	for _, tr := range part {
		if err, ok := failed[string(tr.Object.GetUID())]; ok {
			t.Trigger(cp, tr, policy.Evaluation{}, err)
		}
	}
}

// ReportsToggled reports whether a policy's results were turned on or off
// (Kyverno's label reports.kyverno.io/disabled) between two copies of one
// generation: a label is no new generation.
func ReportsToggled(was, now metav1.Object) bool {
	return policyreport.Reported(was) != policyreport.Reported(now)
}

// UnreportUnmatched removes, once a full sync matched the policy's
// triggers, its results from the reports of the triggers it no longer
// matches, as Kyverno's reports hold results only for the policies that
// match: a trigger whose labels or namespace left the policy's selectors,
// or a policy whose match narrowed or that reports turned off. A trigger
// whose match failed (unmatched) keeps its result; so do all when a
// trigger resource could not be read, as which triggers match is then
// unknown.
func (t *Teller) UnreportUnmatched(cp *policy.Compiled, matched []policy.Trigger, unmatched []types.UID) {
	if t.reports == nil || cp.ResolveErr != nil {
		return
	}
	name := policyreport.PolicyName(cp.Policy)
	if !policyreport.Reported(cp.Policy) {
		t.reports.DropPolicy(name)
		return
	}
	keep := sets.New(unmatched...)
	for _, tr := range matched {
		keep.Insert(tr.Object.GetUID())
	}
	t.reports.Retain(name, keep.Has)
}

// UnreportDirty removes, in an incremental sync, the policy's results from
// the reports of the changed triggers it no longer matches.
func (t *Teller) UnreportDirty(cp *policy.Compiled, dirty []types.UID, matched []policy.Trigger) {
	if t.reports == nil {
		return
	}
	keep := sets.New[types.UID]()
	for _, tr := range matched {
		keep.Insert(tr.Object.GetUID())
	}
	name := policyreport.PolicyName(cp.Policy)
	for _, uid := range dirty {
		if !keep.Has(uid) {
			t.reports.Unset(uid, name)
		}
	}
}

// UnreportPolicy removes a deleted policy's results from every report.
func (t *Teller) UnreportPolicy(key policy.Key) { t.reports.DropPolicy(key.ReportName()) }

// TriggerGone drops, at a DELETE of o, what the report writer holds for it.
// A DELETE from a filtered informer may only say that o left the
// selection of the policies it serves (triggered): their results go, and
// the others' stay.
func (t *Teller) TriggerGone(o *cluster.Object, filtered bool, triggered []*policy.Compiled) {
	if !filtered {
		t.reports.Forget(o.GetUID())
		return
	}
	if t.reports == nil {
		return
	}
	for _, cp := range triggered {
		if policyreport.Reported(cp.Policy) {
			t.reports.Set(policyreport.TriggerOf(o), policyreport.PolicyName(cp.Policy), nil)
		}
	}
}
