package reconcile

import (
	"context"
	"errors"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/blast"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/state"
)

// fullSync computes the policy's whole desired set from every trigger.
type fullSync struct{ s *syncer }

// match lists the policy's admitted, matching triggers, then the
// tombstones it has yet to replay.
func (f fullSync) match(ctx context.Context, run *syncRun) (bool, error) {
	s := f.s
	// Without a tally, no full sync of the policy has run cleanly since
	// Sprout started: a restart's, whose new triggers come first.
	newFirst := s.states.Of(run.key).Tally() == nil
	s.states.Of(run.key).SetTally(nil)
	s.metrics.CountSync(run.key.String(), false)
	run.phase = s.metrics.Phases()
	mt, err := s.matcher.matchingTriggers(ctx, run.cp, newFirst)
	if err != nil {
		return false, err
	}
	run.phase.Done("match")
	run.tombstones = s.states.Of(run.key).PendingTombstones()
	// Matched a part at a time as generate takes them (matching).
	run.matching = mt
	return true, nil
}

// endMatch matches what the sync's match has not yet (generate stopped
// early, or the policy may generate nothing), and keeps what the whole
// match found: the triggers, then the tombstones, and those whose match
// failed.
func (s *syncer) endMatch(run *syncRun, tombstonesTaken bool) {
	mt := run.matching
	run.matching = nil
	run.triggers = append(run.triggers, mt.all()...)
	if !tombstonesTaken {
		run.triggers = append(run.triggers, run.tombstones...)
	}
	run.unmatched, run.matchErr = mt.done()
	if mt.stopped == nil {
		// What was not matched is known only after a whole match.
		s.tell.UnreportUnmatched(run.cp, run.triggers, run.unmatched)
	}
}

func (fullSync) accept(*syncRun, *generation, error) bool { return true }

func (f fullSync) prune(ctx context.Context, run *syncRun, w writer, g *generation) (inventory.ChangeSet, error) {
	f.applied(run, g)
	return f.pruneUnwanted(ctx, run, w, g)
}

// keep keeps what the sync found per trigger, if it was clean, and
// reports whether it did.
func (f fullSync) keep(run *syncRun, g *generation, changes inventory.ChangeSet, err error) (bool, []types.UID) {
	s := f.s
	if err != nil || !g.clean() || changes.NotOwned() != "" || run.cp.ResolveErr != nil || s.states.Of(run.key).Ledger().Rebuilding() {
		return false, nil
	}
	s.states.Of(run.key).SetTally(state.NewTally(run.cp, g.contributions))
	return true, nil
}

// applied takes what generate found: the triggers that failed keep their
// objects, and the tombstones generated from are done with.
func (f fullSync) applied(run *syncRun, g *generation) {
	s := f.s
	if run.cp.Policy.PolicySpec().Synchronize() {
		s.metrics.SetSettled(run.key.String(), g.settled)
	}
	for _, uid := range run.unmatched {
		g.failed.Insert(string(uid))
	}
	s.skippedEvent(run.key, run.cp, g.skipped)
	if g.applyErr == nil {
		// Generated once, never again; one that failed is tried again.
		s.states.Of(run.key).TombstonesDone(slices.DeleteFunc(run.tombstones, func(t policy.Trigger) bool { return g.failed.Has(string(t.Object.GetUID())) }))
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
func (f fullSync) pruneUnwanted(ctx context.Context, run *syncRun, w writer, g *generation) (inventory.ChangeSet, error) {
	s := f.s
	changes := g.changes
	var pruneErr error
	if complete := f.complete(run.key, g); complete && run.cp.Policy.PolicySpec().Synchronize() {
		s.states.Of(run.key).Ledger().RetainClaims(changes, nil)
		// What an earlier sync created that the cache does not show yet
		// cannot be pruned now: it is looked at once it is cached.
		s.created.Overlook(run.key.String(), nil, run.start)
		var pruned inventory.ChangeSet
		pruned, pruneErr = f.pruneStale(ctx, w, run.key, run.cp, g.held())
		changes.Changes = append(changes.Changes, pruned.Changes...)
		s.states.Of(run.key).Ledger().NoteOwn(pruned)
	}
	// A binding refused for its role goes whatever else the sync found.
	pruned, refusedErr := s.checks.pruneRefused(ctx, blast.Unguarded(w), run.key, g.verdicts)
	changes.Changes = append(changes.Changes, pruned.Changes...)
	run.phase.Done("prune")
	if changes.Written() {
		s.log.Info("applied", "policy", run.key.String(), "changes", changes)
	}
	return changes, errors.Join(pruneErr, refusedErr)
}

// complete reports whether the sync knows the policy's whole desired set:
// nothing failed to map or apply, and a lost record has been rebuilt from
// the objects, whose triggers a sync has matched since.
func (f fullSync) complete(key policy.Key, g *generation) bool {
	complete := errors.Join(g.mapErr, g.applyErr) == nil
	if !f.s.states.Of(key).Ledger().Rebuilding() {
		return complete
	}
	switch {
	case g.relearnt:
		f.s.loop.queue(key)
		return false
	case g.rebuilt && complete:
		f.s.states.Of(key).Ledger().Rebuild(false)
		return true
	}
	return false
}

// pruneStale deletes what the policy owns but its last apply did not
// want, except the objects of the triggers that failed: what they want is
// unknown.
func (f fullSync) pruneStale(ctx context.Context, w writer, key policy.Key, cp *policy.Compiled, failed sets.Set[string]) (inventory.ChangeSet, error) {
	owned, err := f.s.ledger.Owned(key)
	if err != nil {
		return inventory.ChangeSet{}, err
	}
	stale := slices.DeleteFunc(cp.Decisions.Stale(owned), func(o *cluster.Object) bool { return failed.Has(o.TriggerUID()) })
	return w.Prune(ctx, cluster.Decoded(stale))
}
