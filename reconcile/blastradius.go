package reconcile

import (
	"context"
	"fmt"

	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/blast"
)

// guardFor returns the blast-radius guard of run's sync, or nil when
// nothing is held: the policy does not synchronize (it never overwrites or
// deletes), its threshold is off, its objects are synced to this revision
// already (a resync's drift repair is not held), none were ever (a new
// policy, or a record from before the guard), or the revision is approved.
func (s *syncer) guardFor(run *syncRun, w writer) *blast.Guard {
	cp := run.cp
	if !cp.Policy.PolicySpec().Synchronize() {
		return nil
	}
	limit, err := blast.Of(cp.Policy, s.blastRadius)
	applied, _ := s.states.Of(run.key).Ledger().Applied()
	switch {
	case err == nil && limit.Off(), applied == "", applied == run.revision:
		return nil
	case cp.Policy.GetAnnotations()[blast.AnnotationApprovedRevision] == run.revision:
		return nil
	}
	// A running controller's writers are Appliers, a plan's their dry runs
	// (New's writerAs).
	var dry writer
	switch w := w.(type) {
	case *inventory.Applier:
		dry = w.DryRun()
	case inventory.DryRun:
		dry = w
	default:
		panic(fmt.Sprintf("blast-radius guard: no dry run of a %T", w))
	}
	return blast.New(w, dry, limit, err, s.dryRun)
}

// releaseHeld ends the sync of a guarded revision: what it held is
// written, or, beyond the threshold, held for good.
//
// The policy's objects are those it had at its last sync of the applied
// revision: what the new revision creates does not dilute a percentage,
// so each sync of it judges alike. A record from before that count counts
// what the sync found.
func (s *syncer) releaseHeld(ctx context.Context, run *syncRun, gd *blast.Guard, changes inventory.ChangeSet) (_ inventory.ChangeSet, err, held error) {
	_, live := s.states.Of(run.key).Ledger().Applied()
	if live == 0 {
		live = changes.Count(inventory.Unchanged) + gd.Held()
	}
	changes, err, held = gd.Release(ctx, run.key, run.revision, live, changes)
	if held != nil {
		s.log.Info("revision held by its blast radius", "policy", run.key.String(), "revision", run.revision, "held", gd.Held())
	} else if gd.Held() > 0 {
		s.log.Info("applied", "policy", run.key.String(), "changes", changes)
	}
	return changes, err, held
}
