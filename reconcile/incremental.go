package reconcile

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/evaluate"
	"github.com/sprout-gitops/sprout/reconcile/policy"
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

// contribution is what one trigger, evaluated cleanly, adds to its
// policy's counts, and where to find it again.
type contribution struct {
	uid     types.UID
	gvr     schema.GroupVersionResource
	key     string
	objects int
	matched bool
	// volatile: its evaluation read the clock or the web, which no event
	// announces.
	volatile bool
	// settled counts its objects settled once its sync ended (settle),
	// read from memo, which is then let go.
	settled int
	memo    *policy.Memo
}

// settle reads, once the applies of its sync ended, how many of the
// trigger's objects its kept evaluation holds settled.
func (c *contribution) settle() {
	if c.memo != nil && c.memo.Evaluated != nil {
		c.settled = c.memo.Evaluated.Settled.Len()
	}
	c.memo = nil
}

// tally is, per trigger, what the policy's last syncs found, kept while
// every one of them was clean: no error, no failed trigger, no refusal.
type tally struct {
	// evaluations and triggers identify the compiled policy it holds for.
	evaluations *policy.Evaluations
	triggers    []schema.GroupVersionResource
	byUID       map[types.UID]counted
	matched     int
	objects     int
	settled     int
	volatile    int
	// since counts the triggers synced incrementally since the last full sync.
	since int
}

// counted is what a tally keeps of a trigger's contribution: one per
// trigger the policy matches, so no more than the counts and where to find
// the trigger again.
type counted struct {
	key              string
	objects, settled int32
	// gvr indexes the tally's triggers.
	gvr               int32
	matched, volatile bool
}

func newTally(cp *policy.Compiled, cs []contribution) *tally {
	t := &tally{evaluations: cp.Evaluations, triggers: cp.Triggers, byUID: make(map[types.UID]counted, len(cs))}
	for _, c := range cs {
		t.add(c)
	}
	return t
}

func (t *tally) add(c contribution) {
	t.remove(c.uid)
	c.settle()
	t.byUID[c.uid] = counted{key: c.key, objects: int32(c.objects), settled: int32(c.settled),
		gvr: int32(slices.Index(t.triggers, c.gvr)), matched: c.matched, volatile: c.volatile}
	t.objects += c.objects
	t.settled += c.settled
	if c.matched {
		t.matched++
	}
	if c.volatile {
		t.volatile++
	}
}

func (t *tally) remove(uid types.UID) {
	c, ok := t.byUID[uid]
	if !ok {
		return
	}
	delete(t.byUID, uid)
	t.objects -= int(c.objects)
	t.settled -= int(c.settled)
	if c.matched {
		t.matched--
	}
	if c.volatile {
		t.volatile--
	}
}

// clean reports whether a generation left nothing to retry or report: an
// incremental sync may build on it.
func (g *generation) clean() bool {
	return len(g.evalErrs) == 0 && len(g.refuseErrs) == 0 && g.mapErr == nil && g.applyErr == nil &&
		g.failed.Len() == 0 && !g.verdicts.AnyRefused()
}

// keepTally keeps what a full sync found per trigger, if it was clean,
// and reports whether it did.
func (c *Controller) keepTally(run *syncRun, g *generation, changes inventory.ChangeSet, err error) bool {
	if err != nil || !g.clean() || changes.NotOwned() != "" || run.cp.ResolveErr != nil || c.states.of(run.key).ledger().Rebuilding() {
		return false
	}
	c.states.of(run.key).setTally(newTally(run.cp, g.contributions))
	return true
}

// incrementalAllowed reports whether the policy may sync only the triggers
// in p: nothing but trigger events queued it, and its last sync left a
// clean tally for the same compiled policy, with nothing pending that
// only a full sync settles.
func (c *Controller) incrementalAllowed(run *syncRun, p *pending, t *tally) bool {
	cp := run.cp
	switch {
	case p.full || t == nil || c.opts.DryRun:
		return false
	case t.evaluations != cp.Evaluations || !slices.Equal(t.triggers, cp.Triggers) || cp.ResolveErr != nil:
		return false
	case t.volatile > 0 || t.since+len(p.triggers) > max(len(t.byUID), minFullEvery):
		return false
	case c.states.of(run.key).ledger().Rebuilding() || len(c.states.of(run.key).pendingTombstones()) > 0:
		return false
	}
	if before, changed := c.states.of(run.key).ledger().DerivedBy(); changed && before != cp.Derives {
		return false
	}
	return true
}

// incrementalSync syncs only the triggers changed since the policy's last
// sync, when it may: whatever it cannot be sure of gives way to a full
// sync, which meets again what made it give up, and nothing it did is
// lost.
type incrementalSync struct {
	c     *Controller
	tally *tally
	dirty []types.UID
}

func (s *incrementalSync) match(run *syncRun) (bool, error) {
	c := s.c
	p := c.queue.dirty.take(run.key)
	if p == nil {
		// Nothing changed since the last sync took what had: a key queued
		// again while that sync ran.
		p = &pending{}
	}
	s.tally = c.states.of(run.key).getTally()
	if !c.incrementalAllowed(run, p, s.tally) {
		return false, nil
	}
	run.phase = c.metrics.Phases()
	triggers, dirty, ok := c.matchDirty(run, p, s.tally)
	if !ok {
		return false, nil
	}
	s.dirty = dirty
	c.tell.UnreportDirty(run.cp, dirty, triggers)
	c.metrics.Syncs.WithLabelValues(run.key.String(), "incremental").Inc()
	run.phase.Done("match")
	run.triggers, run.incremental = triggers, true
	return true, nil
}

// accept gives way to a full sync on any failure: only a clean generation
// adjusts the tally trigger by trigger.
func (s *incrementalSync) accept(run *syncRun, g *generation, err error) bool {
	if err != nil || !g.clean() {
		run.triggers, run.incremental = nil, false
		return false
	}
	return true
}

// prune deletes what the changed triggers own and no longer want, and
// adjusts the counts the last full sync found, trigger by trigger.
func (s *incrementalSync) prune(ctx context.Context, run *syncRun, w writer, g *generation) (inventory.ChangeSet, error) {
	c, t := s.c, s.tally
	changes, pruneErr := c.pruneDirty(ctx, run, w, g, s.dirty)
	changes.Changes = append(g.changes.Changes, changes.Changes...)
	if len(g.skipped) > 0 {
		// The triggers an exception skipped among those evaluated again,
		// as a trigger created after the last full sync.
		c.skippedEvent(run.key, run.cp, g.skipped)
	}
	if changes.Written() {
		c.log.Info("applied", "policy", run.key.String(), "changes", changes)
	}
	for _, uid := range s.dirty {
		t.remove(uid)
	}
	for _, ct := range g.contributions {
		t.add(ct)
	}
	t.since += len(s.dirty)
	g.matched, g.objects = t.matched, t.objects
	if run.cp.Policy.PolicySpec().Synchronize() {
		c.metrics.Settled.WithLabelValues(run.key.String()).Set(float64(t.settled))
	}
	return changes, pruneErr
}

func (s *incrementalSync) keep(run *syncRun, _ *generation, changes inventory.ChangeSet, err error) (bool, []types.UID) {
	kept := err == nil && changes.NotOwned() == ""
	if !kept {
		s.c.states.of(run.key).setTally(nil)
	}
	return kept, s.dirty
}

// matchDirty finds, from the caches, the changed triggers the policy has
// admitted and selects now. It returns them, the UIDs of every changed
// trigger, and false when a full sync must decide instead: a match failed,
// a trigger is one of the policy's own objects, or a trigger's resource is
// not one the policy watches now.
func (c *Controller) matchDirty(run *syncRun, p *pending, t *tally) ([]policy.Trigger, []types.UID, bool) {
	cp := run.cp
	ms := c.matchSettingsOf(run.key, cp)
	var out []policy.Trigger
	dirty := make([]types.UID, 0, len(p.triggers))
	for uid, d := range p.triggers {
		dirty = append(dirty, uid)
		if d.old != nil {
			cp.Evaluations.Forget(d.old)
		}
		if d.key == "" {
			// Known by an object it generated: a trigger the policy does
			// not select now has no desired objects, and its objects go.
			prev, ok := t.byUID[uid]
			if !ok {
				continue
			}
			if prev.gvr < 0 {
				return nil, nil, false
			}
			d.gvr, d.key = t.triggers[prev.gvr], prev.key
		}
		if !slices.Contains(cp.Triggers, d.gvr) {
			return nil, nil, false
		}
		store, _ := c.intake.triggers.Store(c.intake.triggerKeyOf(cp, d.gvr))
		if store == nil {
			return nil, nil, false
		}
		obj, exists, err := store.GetByKey(d.key)
		u, _ := obj.(*cluster.Object)
		if err != nil || !exists || u == nil || u.GetUID() != uid {
			continue // deleted, or another object by that name: its own event tells
		}
		m := cp.Evaluations.Keep(u)
		ok, self, err := c.matchOne(run.key, cp, d.gvr, u, m, ms)
		if err != nil || self {
			// A failed match, or an object of the policy's own among its
			// triggers, which only a full sync counts and reports.
			return nil, nil, false
		}
		if ok {
			out = append(out, policy.Trigger{GVR: d.gvr, Object: u, Memo: m})
		}
	}
	return out, dirty, true
}

// pruneDirty deletes what the changed triggers of a synchronizing policy
// own and no longer want: the objects of those triggers that the sync's
// round does not hold.
func (c *Controller) pruneDirty(ctx context.Context, run *syncRun, w writer, g *generation, dirty []types.UID) (inventory.ChangeSet, error) {
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
	c.states.of(run.key).ledger().RetainClaims(g.changes, uids)
	c.created.Overlook(run.key.String(), uids.Has, run.start)
	owned, err := c.ledger.OwnedBy(run.key, prunable)
	if err != nil {
		return inventory.ChangeSet{}, err
	}
	stale := run.decisions.Stale(owned)
	if len(stale) == 0 {
		return inventory.ChangeSet{}, nil
	}
	pruned, err := w.Prune(ctx, cluster.Decoded(stale))
	c.states.of(run.key).ledger().NoteOwn(pruned)
	return pruned, err
}

// recordReads records what a sync read, the resources and the
// GlobalContextEntries, whose changes queue the policy: a full sync's reads
// replace those recorded, an incremental sync's add to them, since the
// triggers it did not evaluate read what they read before.
func (c *Controller) recordReads(run *syncRun, reader *evaluate.Reader) {
	c.states.of(run.key).setReads(reader.Resources(), reader.Entries(), run.incremental)
}
