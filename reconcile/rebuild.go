package reconcile

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// rebuildAdmissions admits again the triggers the policy's objects say it
// generated for, and takes the beginning they tell of a policy from files
// (ledger.Entry.Relearn), while its record is being rebuilt. It returns
// the policy, changed when its beginning did, and whether anything was
// learnt.
func (m *triggerMatcher) rebuildAdmissions(key policy.Key, cp *policy.Compiled) (*policy.Compiled, bool) {
	owned, err := m.ledger.Owned(key)
	if err != nil || len(owned) == 0 {
		return cp, false
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
	return cp, learnt || admitted > 0
}
