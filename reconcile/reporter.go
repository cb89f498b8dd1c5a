package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// outcome is what one sync found, for the policy's status.
type outcome = report.Outcome

// reporter is where a sync tells what it did: the policy's record, then
// its status, Events and metrics. A running controller has liveReporter;
// a dry run has planReporter, which keeps the plan and writes nothing.
type reporter interface {
	// progressing tells that a sync of the policy begins.
	progressing(key policy.Key, cp *policy.Compiled)
	// record writes the policy's record if what it should hold changed.
	record(ctx context.Context, key policy.Key, cp *policy.Compiled) error
	// report tells the outcome of one sync.
	report(r *syncReport)
}

var (
	_ reporter = liveReporter{}
	_ reporter = planReporter{}
)

// syncReport is what one sync of a policy found.
type syncReport struct {
	run *syncRun
	out outcome
	// changes are what the sync did (dry, would do) to each object.
	changes inventory.ChangeSet
	// evalErr joins the evaluations that failed, each counted.
	evalErr error
	// triggers are those the sync generated for, told with
	// Options.TriggerEvents.
	triggers []policy.Trigger
	// held says what the blast-radius guard held; unheldErr is out.Err
	// without it.
	held, unheldErr error
}

// hold makes a report of a sync whose deletions and overwrites were held
// (held not nil): the policy is Stalled until the revision is approved,
// whatever else the sync found.
func (r *syncReport) hold(held error) {
	r.unheldErr = r.out.Err
	if held == nil {
		return
	}
	r.held = held
	r.out.Reason, r.out.Err = report.ReasonBlastRadiusExceeded, errors.Join(r.out.Err, held)
}

// liveReporter writes records, status and Events, and counts in metrics.
type liveReporter struct{ s *syncer }

func (l liveReporter) progressing(key policy.Key, cp *policy.Compiled) { l.s.tell.Progressing(key, cp) }

func (l liveReporter) record(ctx context.Context, key policy.Key, cp *policy.Compiled) error {
	return l.s.ledger.Save(ctx, key, cp, l.s.states.Of(key).Ledger())
}

func (l liveReporter) report(r *syncReport) {
	s, key, cp := l.s, r.run.key, r.run.cp
	before := s.tell.ReadyBefore(key, cp)
	s.tell.Later(key, cp, r.out)
	if p := r.run.phase; p != nil {
		p.Done("report")
		p.Observe()
	}
	s.metrics.ObserveSync(key.String(), time.Since(r.run.start).Seconds(), r.out.Reason, r.changes, r.evalErr)
	s.tell.Events(key, cp, before, r.out, r.changes, r.triggers)
}

// planReporter keeps what a dry-run sync would do, for Plan.
type planReporter struct{ plans *plans }

func (planReporter) progressing(policy.Key, *policy.Compiled) {}

func (planReporter) record(context.Context, policy.Key, *policy.Compiled) error { return nil }

func (p planReporter) report(r *syncReport) {
	if r.held != nil {
		p.plans.keep(r.run.key, r.changes, r.unheldErr, r.held.Error())
		return
	}
	p.plans.keep(r.run.key, r.changes, r.out.Err, "")
}
