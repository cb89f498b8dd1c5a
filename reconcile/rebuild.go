package reconcile

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// rebuildAdmissions admits again the triggers the policy's objects say it
// generated for, and takes the beginning they tell of a policy from files
// (ledger.Entry.Relearn), while its record is being rebuilt. It returns
// the policy, changed when its beginning did, and whether anything was
// learnt. It reads every trigger: a trigger informer still listing is
// waited for (errWaiting when it is released meanwhile). An error stops
// the sync.
func (m *triggerMatcher) rebuildAdmissions(ctx context.Context, key policy.Key, cp *policy.Compiled) (*policy.Compiled, bool, error) {
	owned, err := m.ledger.Owned(key)
	if err != nil {
		// Rebuilt from what could not be read, the record would forget
		// admissions: the sync stops, and is tried again.
		return cp, false, fmt.Errorf("rebuild the record from the objects: %w", err)
	}
	if len(owned) == 0 {
		return cp, false, nil
	}
	for _, gvr := range cp.Triggers {
		if _, listed := m.informers.WaitListed(ctx, m.watch.triggerKeyOf(cp, gvr)); !listed {
			if err := ctx.Err(); err != nil {
				return cp, false, err
			}
			return cp, false, errWaiting
		}
	}
	created := map[types.UID]time.Time{}
	m.eachCachedTrigger(cp, func(o *cluster.Object) { created[o.GetUID()] = o.Created() })
	began, admitted := m.states.Of(key).Ledger().Relearn(cp, owned, created)
	learnt := !began.IsZero()
	if learnt {
		next := *cp
		next.Activated = began
		m.loop.replace(key, cp, &next)
		m.log.Info("policy's beginning rebuilt from its objects", "policy", key.String(), "activated", began)
		cp = &next
	}
	if admitted > 0 {
		m.log.Info("policy's admissions rebuilt from its objects", "policy", key.String(), "triggers", admitted)
	}
	return cp, learnt || admitted > 0, nil
}
