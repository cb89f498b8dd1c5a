package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/cluster"
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
	triggers, tombstones []policy.Trigger
	// unmatched are the triggers whose match failed, for matchErr.
	unmatched []types.UID
	matchErr  error
	// incremental: the sync looks only at the triggers changed since the
	// last (incremental.go); decisions are those its round decides with.
	incremental bool
	decisions   *inventory.Decisions
}

// sync makes the cluster hold what one policy wants, computed from the
// informer caches as they are now. Its phases: snapshot the compiled
// policy → match its admitted triggers → evaluate and apply them, a part
// at a time, each part's resources watched and recorded before it is
// written (generate) → prune what is no longer desired → record → report.
func (c *Controller) sync(ctx context.Context, key policy.Key) error {
	run, err := c.snapshot(ctx, key)
	if run == nil {
		c.forgetChanges(key)
		return err
	}
	outer := ctx
	ctx, end := c.beginSync(ctx, key, run.cp)
	defer end()
	c.reporter.progressing(key, run.cp)
	c.reads.Begin(key)
	// A sync that keeps no reads ends with them unknown.
	defer c.intake.endReads(run, false, nil, nil)
	if done, err := c.runPhases(ctx, outer, run, &incrementalSync{c: c}); done {
		return err
	}
	_, err = c.runPhases(ctx, outer, run, fullSync{c})
	return err
}

// forgetChanges drops what events marked changed for a policy that is
// neither running nor being cleaned up after: the events of its own
// objects' deletion queue it once it is gone, and nothing else would take
// them.
func (c *Controller) forgetChanges(key policy.Key) {
	c.mu.RLock()
	_, running := c.policies[key]
	_, leaving := c.deleted[key]
	c.mu.RUnlock()
	if !running && !leaving {
		c.queue.dirty.take(key)
	}
}

// scope is what tells a full sync from an incremental one: which triggers
// it looks at, what it prunes, and what it keeps for the next. Every
// other phase is the one pipeline, runPhases, the same for both.
type scope interface {
	// match finds the triggers the sync looks at. Not ok: the scope
	// cannot decide, and a full sync must, meeting err again if any.
	match(run *syncRun) (ok bool, err error)
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

// runPhases runs one sync of run's policy in s: match → account → generate
// (evaluate, record ahead, apply) → what was read → prune → outcome →
// record and report → what is kept. It reports whether the sync was done;
// not done, a full sync must follow, and nothing this one did is lost.
func (c *Controller) runPhases(ctx, outer context.Context, run *syncRun, s scope) (bool, error) {
	if ok, err := s.match(run); !ok {
		return false, err
	}
	as, err := c.rights.ActingAs(ctx, run.cp.Policy)
	if err != nil {
		var denied *access.DeniedError
		var invalid *access.InvalidAccountError
		if run.incremental || !errors.As(err, &denied) && !errors.As(err, &invalid) {
			return false, err
		}
		// Terminal until the policy, the flag or RBAC changes, like a
		// compile error; an RBAC change rechecks it.
		out := outcome{Reason: ReasonInvalidServiceAccount, Err: err, Granted: &grantVerdict{Err: err}}
		return true, c.conclude(ctx, run, &syncReport{out: out})
	}
	w, err := c.writers.For(as)
	if err != nil {
		return !run.incremental, err
	}
	reader := c.readerFor(run, as)
	g, err := c.generate(ctx, run, w, reader)
	c.recordReads(run, reader)
	if ctx.Err() != nil && outer.Err() == nil {
		// The policy was deleted: its last sync, queued, prunes what this
		// one wrote; nothing more is written for it.
		c.log.Info("sync stopped: policy deleted", "policy", run.key.String())
		return true, nil
	}
	if !s.accept(run, g, err) {
		return false, err
	}
	c.states.of(run.key).bound(g.verdicts.Refs(), err == nil && !run.incremental)
	if err != nil {
		return true, err
	}
	changes, pruneErr := s.prune(ctx, run, w, g)
	if stopping(outer) {
		return true, nil
	}
	report := c.outcomeOf(ctx, run, g, changes, pruneErr)
	recordErr := c.conclude(ctx, run, report)
	err = errors.Join(run.matchErr, report.evalErr, g.mapErr, g.applyErr, pruneErr, recordErr)
	kept, dirty := s.keep(run, g, changes, err)
	c.intake.endReads(run, kept, dirty, g.reads)
	return true, err
}

// fullSync computes the policy's whole desired set from every trigger.
type fullSync struct{ c *Controller }

func (f fullSync) match(run *syncRun) (bool, error) {
	f.c.states.of(run.key).setTally(nil)
	f.c.metrics.Syncs.WithLabelValues(run.key.String(), "full").Inc()
	if err := f.c.match(run); err != nil {
		return false, err
	}
	f.c.tell.UnreportUnmatched(run.cp, run.triggers, run.unmatched)
	return true, nil
}

func (fullSync) accept(*syncRun, *generation, error) bool { return true }

func (f fullSync) prune(ctx context.Context, run *syncRun, w writer, g *generation) (inventory.ChangeSet, error) {
	f.c.applied(run, g)
	return f.c.pruneUnwanted(ctx, run, w, g)
}

func (f fullSync) keep(run *syncRun, g *generation, changes inventory.ChangeSet, err error) (bool, []types.UID) {
	return f.c.keepTally(run, g, changes, err), nil
}

// snapshot reads the compiled policy of key and makes sure its triggers
// can be read: it returns nil, with what the sync returns, when they
// cannot, or when the policy is gone (after its last sync, finalize).
func (c *Controller) snapshot(ctx context.Context, key policy.Key) (*syncRun, error) {
	start := time.Now()
	c.mu.RLock()
	cp, gone := c.policies[key], c.deleted[key]
	c.mu.RUnlock()
	if cp == nil {
		if gone != (retired{}) {
			return nil, c.finalize(ctx, key, gone)
		}
		return nil, nil
	}
	run := &syncRun{key: key, cp: cp, start: start}
	if suspended(cp.Policy) {
		// Only the status is written. What the informers admit meanwhile
		// is remembered: the first sync after resuming catches up.
		c.reporter.report(&syncReport{run: run, out: outcome{Reason: ReasonSuspended, Err: errSuspended}})
		return nil, nil
	}
	if err := cp.Program.Err(); err != nil {
		// Terminal until the policy changes: retrying cannot fix a typo. The
		// record carries it too: for a policy from files it is the only status.
		return nil, c.conclude(ctx, run, &syncReport{out: outcome{Reason: ReasonCompileFailed, Err: err}})
	}
	if access.Blocked(cp.ResolveErr) || (len(cp.Triggers) == 0 && cp.ResolveErr != nil) {
		// Discovery failed, the account may not read a trigger, or nothing
		// the rules name is served (yet): a CRD installed or a permission
		// granted since is found by looking again.
		cp = c.resolveAgain(key, cp)
		run.cp = cp
		if access.Blocked(cp.ResolveErr) {
			// Which triggers exist is unknown: nothing can be decided.
			c.reporter.report(&syncReport{run: run, out: outcome{Reason: ReasonMatchFailed, Err: cp.ResolveErr, Granted: c.verdict(ctx, key, cp)}})
			if c.rights.WaitsForPermission(cp.ResolveErr) {
				// Not retried: an RBAC change queues it (recheckPermissions).
				return nil, nil
			}
			return nil, cp.ResolveErr
		}
	}
	if !c.triggersSynced(cp) {
		return nil, errWaiting
	}
	return run, nil
}

// match lists the policy's admitted, matching triggers, then the
// tombstones it has yet to replay.
func (c *Controller) match(run *syncRun) error {
	run.phase = c.metrics.Phases()
	triggers, unmatched, err := c.matchingTriggers(run.cp)
	if errors.Is(err, errWaiting) {
		return errWaiting
	}
	run.phase.Done("match")
	run.tombstones = c.states.of(run.key).pendingTombstones()
	run.triggers = append(triggers, run.tombstones...)
	run.unmatched, run.matchErr = unmatched, err
	return nil
}

// applied takes what generate found: the triggers that failed keep their
// objects, and the tombstones generated from are done with.
func (c *Controller) applied(run *syncRun, g *generation) {
	if run.cp.Policy.PolicySpec().Synchronize() {
		c.metrics.Settled.WithLabelValues(run.key.String()).Set(float64(g.settled))
	}
	for _, uid := range run.unmatched {
		g.failed.Insert(string(uid))
	}
	c.skippedEvent(run.key, run.cp, g.skipped)
	if g.applyErr == nil {
		// Generated once, never again; one that failed is tried again.
		c.states.of(run.key).tombstonesDone(slices.DeleteFunc(run.tombstones, func(t policy.Trigger) bool { return g.failed.Has(string(t.Object.GetUID())) }))
	}
}

// pruneUnwanted deletes what a synchronizing policy owns and no longer
// wants, and the bindings refused for their role. It returns every change
// of the sync.
//
// Prune only after a desired set known for every trigger that did not
// fail, and an apply without error: an object missing from a partial set
// is not unwanted, only unknown. A trigger that failed (its match, its
// evaluation, a refusal) keeps its objects as they are until it evaluates
// cleanly again; the other triggers are pruned as usual.
func (c *Controller) pruneUnwanted(ctx context.Context, run *syncRun, w writer, g *generation) (inventory.ChangeSet, error) {
	changes := g.changes
	var pruneErr error
	if complete := c.complete(run.key, g); complete && run.cp.Policy.PolicySpec().Synchronize() {
		c.states.of(run.key).ledger().RetainClaims(changes, nil)
		// What an earlier sync created that the cache does not show yet
		// cannot be pruned now: it is looked at once it is cached.
		c.created.Overlook(run.key.String(), nil, run.start)
		var pruned inventory.ChangeSet
		pruned, pruneErr = c.prune(ctx, w, run.key, run.cp, g.held())
		changes.Changes = append(changes.Changes, pruned.Changes...)
		c.states.of(run.key).ledger().NoteOwn(pruned)
	}
	// A binding refused for its role goes whatever else the sync found.
	pruned, refusedErr := c.pruneRefused(ctx, w, run.key, g.verdicts)
	changes.Changes = append(changes.Changes, pruned.Changes...)
	run.phase.Done("prune")
	if changes.Written() {
		c.log.Info("applied", "policy", run.key.String(), "changes", changes)
	}
	return changes, errors.Join(pruneErr, refusedErr)
}

// complete reports whether the sync knows the policy's whole desired set:
// nothing failed to map or apply, and a lost record has been rebuilt from
// the objects, whose triggers a sync has matched since.
func (c *Controller) complete(key policy.Key, g *generation) bool {
	complete := errors.Join(g.mapErr, g.applyErr) == nil
	if !c.states.of(key).ledger().Rebuilding() {
		return complete
	}
	switch {
	case g.relearnt:
		c.queue.Add(key)
		return false
	case g.rebuilt && complete:
		c.states.of(key).ledger().Rebuild(false)
		return true
	}
	return false
}

// prune deletes what the policy owns but its last apply did not want,
// except the objects of the triggers that failed: what they want is
// unknown.
func (c *Controller) prune(ctx context.Context, w writer, key policy.Key, cp *policy.Compiled, failed sets.Set[string]) (inventory.ChangeSet, error) {
	owned, err := c.ledger.Owned(key)
	if err != nil {
		return inventory.ChangeSet{}, err
	}
	stale := slices.DeleteFunc(cp.Decisions.Stale(owned), func(o *cluster.Object) bool { return failed.Has(o.TriggerUID()) })
	return w.Prune(ctx, cluster.Decoded(stale))
}

// outcomeOf sums a sync up for its report. A refusal, like an object
// someone else owns, is reported but not retried: only a change to the
// policy or the cluster can lift it, and either queues the policy again.
func (c *Controller) outcomeOf(ctx context.Context, run *syncRun, g *generation, changes inventory.ChangeSet, pruneErr error) *syncReport {
	evalErr, refuseErr := g.evalErr(), g.refuseErr()
	var notOwned error
	if s := changes.NotOwned(); s != "" {
		notOwned = fmt.Errorf("not written, not Sprout's for this policy and trigger: %s", s)
	}
	out := outcome{Triggers: g.matched, Objects: g.objects, Failed: g.failed.Len(),
		Err:     errors.Join(run.cp.ResolveErr, run.matchErr, evalErr, refuseErr, g.mapErr, g.applyErr, pruneErr, notOwned),
		Granted: c.verdict(ctx, run.key, run.cp)}
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
func (c *Controller) conclude(ctx context.Context, run *syncRun, r *syncReport) error {
	r.run = run
	err := c.reporter.record(ctx, run.key, run.cp)
	c.reporter.report(r)
	return err
}
