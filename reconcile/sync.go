package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// errWaiting ends a sync that cannot run before a cache has synced; the
// policy is queued again shortly, without counting as a failure.
var errWaiting = errors.New("waiting for caches to sync")

// syncRun is one sync of one policy: what each phase found that the next
// ones need.
type syncRun struct {
	key   policy.Key
	cp    *policy.Compiled
	start time.Time
	phase *report.Phases
	// triggers are the admitted, matching triggers, then the tombstones.
	// A full sync matches them as generate takes them (matching, nil once
	// every trigger is matched).
	triggers, tombstones []policy.Trigger
	matching             *matching
	// listing: a trigger informer was still listing when the sync began;
	// its match takes the objects as they come (matching).
	listing bool
	// unmatched are the triggers whose match failed, for matchErr.
	unmatched []types.UID
	matchErr  error
	// incremental: the sync looks only at the triggers changed since the
	// last (incremental.go); decisions are those its round decides with.
	incremental bool
	decisions   *inventory.Decisions
	// revision is the policy's content revision (Revision).
	revision string
}

// sync makes the cluster hold what one policy wants, computed from the
// informer caches as they are now. Its phases: snapshot the compiled
// policy → match its admitted triggers → evaluate and apply them, a part
// at a time, each part's resources watched and recorded before it is
// written (generate) → prune what is no longer desired → record → report.
func (s *syncer) sync(ctx context.Context, key policy.Key) error {
	run, err := s.snapshot(ctx, key)
	if run == nil {
		s.forgetChanges(key)
		return err
	}
	outer := ctx
	ctx, end := s.loop.beginSync(ctx, key, run.cp)
	defer end()
	s.reporter.progressing(key, run.cp)
	s.reads.Begin(key)
	// A sync that keeps no reads ends with them unknown.
	defer s.cache.endReads(run, false, nil, nil)
	if done, err := s.runPhases(ctx, outer, run, &incrementalSync{s: s}); done {
		return err
	}
	_, err = s.runPhases(ctx, outer, run, fullSync{s})
	return err
}

// forgetChanges drops what events marked changed for a policy that is
// neither running nor being cleaned up after: the events of its own
// objects' deletion queue it once it is gone, and nothing else would take
// them.
func (s *syncer) forgetChanges(key policy.Key) {
	if cp, gone := s.loop.policy(key); cp == nil && gone == (retired{}) {
		s.loop.takeChanges(key)
	}
}

// scope is what tells a full sync from an incremental one: which triggers
// it looks at, what it prunes, and what it keeps for the next. Every
// other phase is the one pipeline, runPhases, the same for both.
type scope interface {
	// match finds the triggers the sync looks at. Not ok: the scope
	// cannot decide, and a full sync must, meeting err again if any.
	match(ctx context.Context, run *syncRun) (ok bool, err error)
	// accept reports whether what generate found may be applied in this
	// scope; not: a full sync must decide.
	accept(run *syncRun, g *generation, err error) bool
	// prune deletes what the triggers looked at own and no longer want,
	// and returns every change of the sync.
	prune(ctx context.Context, run *syncRun, w writer, g *generation) (inventory.ChangeSet, error)
	// keep keeps what the sync found per trigger, for the syncs after it,
	// and reports whether its reads may be kept; dirty are the triggers
	// whose reads it replaces.
	keep(run *syncRun, g *generation, changes inventory.ChangeSet, err error) (ok bool, dirty []types.UID)
}

// runPhases runs one sync of run's policy in sc: match → account →
// generate (evaluate, record ahead, apply) → what was read → prune →
// outcome → record and report → what is kept. It reports whether the sync
// was done; not done, a full sync must follow, and nothing this one did is
// lost.
func (s *syncer) runPhases(ctx, outer context.Context, run *syncRun, sc scope) (bool, error) {
	if ok, err := sc.match(ctx, run); !ok {
		return false, err
	}
	as, err := s.checks.actingAs(ctx, run.cp.Policy)
	if err != nil {
		var denied *access.DeniedError
		var invalid *access.InvalidAccountError
		if run.incremental || !errors.As(err, &denied) && !errors.As(err, &invalid) {
			return false, err
		}
		// Terminal until the policy, the flag or RBAC changes, like a
		// compile error; an RBAC change rechecks it.
		out := outcome{Reason: ReasonInvalidServiceAccount, Err: err, Granted: &grantVerdict{Err: err}}
		return true, s.conclude(ctx, run, &syncReport{out: out})
	}
	w, err := s.writers.For(as)
	if err != nil {
		return !run.incremental, err
	}
	run.revision = run.cp.Content
	gd := s.guardFor(run, w)
	if gd != nil {
		w = gd
	}
	reader := s.cache.readerFor(run, as)
	g, err := s.generate(ctx, run, w, reader, sc)
	s.recordReads(run, reader)
	if ctx.Err() != nil && outer.Err() == nil {
		// The policy was deleted: its last sync, queued, prunes what this
		// one wrote; nothing more is written for it.
		s.log.Info("sync stopped: policy deleted", "policy", run.key.String())
		return true, nil
	}
	if !sc.accept(run, g, err) {
		return false, err
	}
	s.states.Of(run.key).Bound(g.verdicts.Refs(), err == nil && !run.incremental)
	if err != nil {
		return true, err
	}
	changes, pruneErr := sc.prune(ctx, run, w, g)
	var held error
	// A sync whose applies or prunes failed knows only part of what the
	// revision changes: it writes nothing held, and is retried.
	if gd != nil && g.mapErr == nil && g.applyErr == nil && pruneErr == nil {
		var releaseErr error
		changes, releaseErr, held = s.releaseHeld(ctx, run, gd, changes)
		pruneErr = errors.Join(pruneErr, releaseErr)
	}
	if stopping(outer) {
		return true, nil
	}
	report := s.outcomeOf(ctx, run, g, changes, pruneErr)
	report.hold(held)
	if held == nil && errors.Join(run.matchErr, report.evalErr, g.mapErr, g.applyErr, pruneErr) == nil {
		s.states.Of(run.key).Ledger().SetApplied(run.revision, g.objects)
	}
	recordErr := s.conclude(ctx, run, report)
	err = errors.Join(run.matchErr, report.evalErr, g.mapErr, g.applyErr, pruneErr, recordErr)
	// A held revision keeps no tally: each sync of it is a full one, which
	// counts what it would change again.
	kept, dirty := sc.keep(run, g, changes, errors.Join(err, held))
	s.cache.endReads(run, kept, dirty, g.reads)
	return true, err
}

// snapshot reads the compiled policy of key and makes sure its triggers
// can be read: it returns nil, with what the sync returns, when they
// cannot, or when the policy is gone (after its last sync, finalize).
func (s *syncer) snapshot(ctx context.Context, key policy.Key) (*syncRun, error) {
	start := time.Now()
	cp, gone := s.loop.policy(key)
	if cp == nil {
		if gone != (retired{}) {
			return nil, s.finalize(ctx, key, gone)
		}
		return nil, nil
	}
	run := &syncRun{key: key, cp: cp, start: start}
	if suspended(cp.Policy) {
		// Only the status is written. What the informers admit meanwhile
		// is remembered: the first sync after resuming catches up.
		s.reporter.report(&syncReport{run: run, out: outcome{Reason: ReasonSuspended, Err: errSuspended}})
		return nil, nil
	}
	if err := cp.Program.Err(); err != nil {
		// Terminal until the policy changes: retrying cannot fix a typo. The
		// record carries it too: for a policy from files it is the only status.
		return nil, s.conclude(ctx, run, &syncReport{out: outcome{Reason: ReasonCompileFailed, Err: err}})
	}
	if access.Blocked(cp.ResolveErr) || (len(cp.Triggers) == 0 && cp.ResolveErr != nil) {
		// Discovery failed, the account may not read a trigger, or nothing
		// the rules name is served (yet): a CRD installed or a permission
		// granted since is found by looking again.
		cp = s.matcher.resolveAgain(key, cp)
		run.cp = cp
		if access.Blocked(cp.ResolveErr) {
			// Which triggers exist is unknown: nothing can be decided.
			s.reporter.report(&syncReport{run: run, out: outcome{Reason: ReasonMatchFailed, Err: cp.ResolveErr, Granted: s.checks.verdict(ctx, key, cp)}})
			if s.checks.waitsForPermission(cp.ResolveErr) {
				// Not retried: an RBAC change queues it (recheckPermissions).
				return nil, nil
			}
			return nil, cp.ResolveErr
		}
	}
	readable, listing := s.matcher.triggersReadable(cp)
	if !readable {
		return nil, errWaiting
	}
	run.listing = listing
	return run, nil
}

// outcomeOf sums a sync up for its report. A refusal, like an object
// someone else owns, is reported but not retried: only a change to the
// policy or the cluster can lift it, and either queues the policy again.
func (s *syncer) outcomeOf(ctx context.Context, run *syncRun, g *generation, changes inventory.ChangeSet, pruneErr error) *syncReport {
	evalErr, refuseErr := g.evalErr(), g.refuseErr()
	var notOwned error
	if ids := changes.NotOwned(); ids != "" {
		notOwned = fmt.Errorf("not written, not Sprout's for this policy and trigger: %s", ids)
	}
	out := outcome{Triggers: g.matched, Objects: g.objects, Failed: g.failed.Len(),
		Err:     errors.Join(run.cp.ResolveErr, run.matchErr, evalErr, refuseErr, g.mapErr, g.applyErr, pruneErr, notOwned),
		Granted: s.checks.verdict(ctx, run.key, run.cp)}
	switch {
	case run.matchErr != nil:
		out.Reason = ReasonMatchFailed
	case g.applyErr != nil || g.mapErr != nil:
		out.Reason = ReasonApplyFailed
	case pruneErr != nil:
		out.Reason = ReasonPruneFailed
	case evalErr != nil:
		out.Reason = ReasonEvaluationFailed
	case refuseErr != nil:
		out.Reason = ReasonRefused
	case notOwned != nil:
		out.Reason = ReasonNotOwned
	case run.cp.ResolveErr != nil:
		out.Reason = ReasonUnobservableTrigger
	}
	return &syncReport{out: out, changes: changes, evalErr: evalErr, triggers: run.triggers}
}

// conclude ends a sync: the record is written if what it must hold
// changed (what a non-synchronizing policy generated, the resources
// written to), then the outcome is reported. It returns the record's
// error: the sync is retried for it.
func (s *syncer) conclude(ctx context.Context, run *syncRun, r *syncReport) error {
	r.run = run
	err := s.reporter.record(ctx, run.key, run.cp)
	s.reporter.report(r)
	return err
}
