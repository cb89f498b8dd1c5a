package reconcile

import (
	"context"
	"errors"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/evaluate"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/queue"
)

// An incremental sync looks only at the triggers events changed since the
// policy's last sync (dirty.go): it matches, evaluates and applies them,
// prunes what they own and no longer want, and adjusts the counts the last
// full sync found, trigger by trigger. Whatever it cannot be sure of makes
// it a full sync instead: the desired set is still what a full recompute
// of the cluster as it is would give.

// minFullEvery is the fewest triggers synced incrementally between two
// full syncs: a full sync runs at the latest once as many triggers as the
// policy has were synced, so its cost spreads over them, and what an
// incremental sync leaves for it (memos of replaced objects, admissions
// of deleted triggers) stays bounded.
const minFullEvery = 1024

// clean reports whether a generation left nothing to retry or report: an
// incremental sync may build on it.
func (g *generation) clean() bool {
	return len(g.evalErrs) == 0 && len(g.refuseErrs) == 0 && g.mapErr == nil && g.applyErr == nil &&
		g.failed.Len() == 0 && !g.verdicts.AnyRefused()
}

// fullBecause says why the policy may not sync only the triggers in p ("" if
// it may: only trigger events queued it, its last sync left a clean tally for
// the same compiled policy, and nothing pending needs a full one).
func (i *incrementalSync) fullBecause(run *syncRun, p *queue.Changes, t *tally) string {
	cp, st := run.cp, i.s.states.Of(run.key)
	switch {
	case run.listing:
		return "a trigger informer is listing"
	case p.Full || t == nil || i.s.dryRun:
		return "queued in full, or no clean sync before"
	case t.Evaluations != cp.Evaluations || !slices.Equal(t.Triggers, cp.Triggers) || cp.ResolveErr != nil:
		return "compiled or resolved again"
	case t.Volatile > 0 || t.Since+len(p.Triggers) > max(len(t.ByUID), minFullEvery):
		return "volatile evaluations, or enough incremental ones"
	case st.Ledger().Rebuilding() || len(st.PendingTombstones()) > 0:
		return "record rebuilding, or tombstones pending"
	}
	if before, changed := st.Ledger().DerivedBy(); changed && before != cp.Derives {
		return "derived objects' policy changed"
	}
	return ""
}

// incrementalSync syncs only the triggers changed since the policy's last
// sync, when it may: whatever it cannot be sure of gives way to a full
// sync, which meets again what made it give up, and nothing it did is
// lost.
type incrementalSync struct {
	s     *syncer
	tally *tally
	dirty []types.UID
}

func (i *incrementalSync) match(_ context.Context, run *syncRun) (bool, error) {
	s := i.s
	p := s.loop.takeChanges(run.key)
	if p == nil {
		// Nothing changed since the last sync took what had: a key queued
		// again while that sync ran.
		p = &queue.Changes{}
	}
	i.tally = s.states.Of(run.key).Tally()
	if why := i.fullBecause(run, p, i.tally); why != "" {
		s.log.Debug("sync in full", "policy", run.key.String(), "because", why)
		return false, nil
	}
	run.phase = s.metrics.Phases()
	triggers, dirty, ok := s.matcher.matchDirty(run, p, i.tally)
	if !ok {
		s.log.Debug("sync in full", "policy", run.key.String(), "because", "a changed trigger cannot be matched alone")
		return false, nil
	}
	i.dirty = dirty
	s.tell.UnreportDirty(run.cp, dirty, triggers)
	s.metrics.CountSync(run.key.String(), true)
	run.phase.Done("match")
	run.triggers, run.incremental = triggers, true
	return true, nil
}

// join takes on the triggers events changed since the sync began, those it
// does not hold already, while the tally allows as many more incremental
// triggers; a change it cannot sync alone (matchDirty) queues a full sync
// and ends the joining.
func (i *incrementalSync) join(run *syncRun) ([]policy.Trigger, bool) {
	s := i.s
	st := s.states.Of(run.key)
	if st.Ledger().Rebuilding() || len(st.PendingTombstones()) > 0 {
		return nil, false
	}
	room := max(len(i.tally.ByUID), minFullEvery) - i.tally.Since - len(i.dirty)
	if room <= 0 {
		return nil, false
	}
	held := sets.New(i.dirty...)
	p := s.loop.takeArrived(run.key, held.Has, room)
	if p == nil {
		return nil, true
	}
	triggers, dirty, ok := s.matcher.matchDirty(run, p, i.tally)
	if !ok {
		s.loop.queue(run.key) // a full sync, which looks at every trigger
		return nil, false
	}
	i.dirty = append(i.dirty, dirty...)
	s.tell.UnreportDirty(run.cp, dirty, triggers)
	run.triggers = append(run.triggers, triggers...)
	return triggers, true
}

// accept gives way to a full sync on any failure: only a clean generation
// adjusts the tally trigger by trigger.
func (i *incrementalSync) accept(run *syncRun, g *generation, err error) bool {
	if err != nil || !g.clean() {
		if err == nil {
			err = errors.Join(g.mapErr, g.applyErr, g.evalErr(), g.refuseErr())
		}
		i.s.log.Debug("sync in full", "policy", run.key.String(), "because", "the incremental one failed", "error", err)
		run.triggers, run.incremental = nil, false
		return false
	}
	return true
}

// prune deletes what the changed triggers own and no longer want, and
// adjusts the counts the last full sync found, trigger by trigger.
func (i *incrementalSync) prune(ctx context.Context, run *syncRun, w writer, g *generation) (inventory.ChangeSet, error) {
	s, t := i.s, i.tally
	changes, pruneErr := i.pruneDirty(ctx, run, w, g)
	changes.Changes = append(g.changes.Changes, changes.Changes...)
	if len(g.skipped) > 0 {
		// The triggers an exception skipped among those evaluated again,
		// as a trigger created after the last full sync.
		s.skippedEvent(run.key, run.cp, g.skipped)
	}
	switch {
	case changes.Changed():
		s.log.Info("applied", "policy", run.key.String(), "changes", changes)
	case changes.Written():
		// Objects created for new triggers, the routine of every event:
		// the policy's Events and the triggers' reports tell them too
		// (docs/decisions.md).
		s.log.Debug("applied", "policy", run.key.String(), "changes", changes)
	}
	for _, uid := range i.dirty {
		t.Remove(uid)
	}
	for _, ct := range g.contributions {
		t.Add(ct)
	}
	t.Since += len(i.dirty)
	g.matched, g.objects = t.Matched, t.Objects
	if run.cp.Policy.PolicySpec().Synchronize() {
		s.metrics.SetSettled(run.key.String(), t.Settled)
	}
	return changes, pruneErr
}

func (i *incrementalSync) keep(run *syncRun, _ *generation, changes inventory.ChangeSet, err error) (bool, []types.UID) {
	kept := err == nil && changes.NotOwned() == ""
	if !kept {
		i.s.states.Of(run.key).SetTally(nil)
	}
	return kept, i.dirty
}

// pruneDirty deletes what the changed triggers of a synchronizing policy
// own and no longer want: the objects of those triggers that the sync's
// round does not hold.
func (i *incrementalSync) pruneDirty(ctx context.Context, run *syncRun, w writer, g *generation) (inventory.ChangeSet, error) {
	s, dirty := i.s, i.dirty
	defer run.phase.Done("prune")
	if !run.cp.Policy.PolicySpec().Synchronize() {
		return inventory.ChangeSet{}, nil
	}
	// A trigger an exception skipped keeps its objects, as in a full sync.
	held := g.held()
	uids := sets.New[string]()
	prunable := make([]types.UID, 0, len(dirty))
	for _, uid := range dirty {
		if !held.Has(string(uid)) {
			uids.Insert(string(uid))
			prunable = append(prunable, uid)
		}
	}
	s.states.Of(run.key).Ledger().RetainClaims(g.changes, uids)
	s.created.Overlook(run.key.String(), uids.Has, run.start)
	owned, err := s.ledger.OwnedBy(run.key, prunable)
	if err != nil {
		return inventory.ChangeSet{}, err
	}
	stale := run.decisions.Stale(owned)
	if len(stale) == 0 {
		return inventory.ChangeSet{}, nil
	}
	pruned, err := w.Prune(ctx, cluster.Decoded(stale))
	s.states.Of(run.key).Ledger().NoteOwn(pruned)
	return pruned, err
}

// recordReads records what a sync read, the resources and the
// GlobalContextEntries, whose changes queue the policy: a full sync's reads
// replace those recorded, an incremental sync's add to them, since the
// triggers it did not evaluate read what they read before.
func (s *syncer) recordReads(run *syncRun, reader *evaluate.Reader) {
	s.states.Of(run.key).SetReads(reader.Resources(), reader.Entries(), run.incremental)
}
