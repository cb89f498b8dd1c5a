package reconcile

import (
	"context"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// finalize is the last sync of a deleted policy. A synchronizing policy that
// does not orphan its objects takes its data objects with it; clones stay,
// as in Kyverno. Then its record goes.
func (s *syncer) finalize(ctx context.Context, key policy.Key, gone retired) error {
	if s.dryRun {
		return nil // a plan covers the policies it was given, not retired ones
	}
	if gone.synchronize && !gone.orphan {
		written := s.states.Of(key).Ledger().Written()
		if _, ready := s.ledger.Track(ctx, key, written); !ready {
			return errWaiting
		}
		owned, err := s.ledger.OwnedLive(ctx, key)
		if err != nil {
			return err
		}
		// It prunes as it wrote: a tenant's policy with its account's rights.
		var as *access.Account
		if gone.account != (access.Account{}) {
			as = &gone.account
		}
		w, err := s.writers.For(as)
		if err != nil {
			return err
		}
		objs := cluster.Decoded(inventory.Data(owned))
		for _, o := range objs {
			// Listed live, and all of it goes whatever its version: the
			// policy that would judge a newer one is gone.
			o.SetResourceVersion("")
		}
		changes, err := w.Prune(ctx, objs)
		if changes.Written() {
			s.log.Info("pruned after policy deletion", "policy", key.String(), "changes", changes)
		}
		if err != nil {
			return err
		}
	}
	if err := s.ledger.Delete(ctx, gone.ref); err != nil {
		return err
	}
	s.tell.UnreportPolicy(key)
	s.loop.retire(key)
	return nil
}
