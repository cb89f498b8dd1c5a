package reconcile

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// TestRoleChangeFindsItsPolicies: a change to a role finds the policies
// whose bindings referred to it at their last sync, and any ClusterRole's
// change those that bind an aggregated one; a policy whose last complete
// sync bound no role, or that left, is not found.
func TestRoleChangeFindsItsPolicies(t *testing.T) {
	byName, byRole, aggregating, other, gone := policy.Key{Name: "by-name"}, policy.Key{Name: "by-role"},
		policy.Key{Name: "aggregating"}, policy.Key{Name: "other"}, policy.Key{Name: "gone"}
	var s states
	refer := func(key policy.Key, aggregated, complete bool, names ...string) {
		s.of(key).bound(access.RoleRefs{Names: sets.New(names...), AnyClusterRole: aggregated}, complete)
	}
	found := func(role string, cluster bool) []string {
		var out []string
		s.each(func(k policy.Key, st *policyState) {
			if st.boundTo(role, cluster) {
				out = append(out, k.Name)
			}
		})
		slices.Sort(out)
		return out
	}
	for _, k := range []policy.Key{byName, byRole, aggregating, other, gone} {
		s.enter(k)
	}
	refer(byName, false, true, "ClusterRole/widened")
	refer(byRole, false, true, "Role/ns/widened")
	refer(aggregating, true, true, "ClusterRole/aggregated")
	refer(other, false, true, "ClusterRole/other", "Role/other-ns/widened")
	refer(gone, false, true, "ClusterRole/widened")
	s.drop(gone)

	if got := found("ClusterRole/widened", true); !slices.Equal(got, []string{"aggregating", "by-name"}) {
		t.Errorf("a ClusterRole's change found %q", got)
	}
	if got := found("Role/ns/widened", false); !slices.Equal(got, []string{"by-role"}) {
		t.Errorf("a Role's change found %q", got)
	}
	// A sync that stopped early only adds to what the last one found.
	refer(byRole, false, false, "Role/ns/other")
	if got := found("Role/ns/widened", false); !slices.Equal(got, []string{"by-role"}) {
		t.Errorf("after an incomplete sync, a Role's change found %q", got)
	}
	refer(byName, false, true)
	if got := found("ClusterRole/widened", false); len(got) != 0 {
		t.Errorf("a policy that binds no role any more is found: %q", got)
	}
}

// TestStateOfAPolicyGoneKeepsNothing: a sync that ends after its policy
// left writes to no state, and makes none: what it would keep is gone with
// the policy, and the states hold only the policies that run.
func TestStateOfAPolicyGoneKeepsNothing(t *testing.T) {
	var s states
	key := policy.Key{Name: "p"}
	s.enter(key).setTally(&tally{})
	s.of(key).telling().Granted(&grantVerdict{})
	s.drop(key)
	st := s.of(key)
	st.setTally(&tally{})
	st.telling().Granted(&grantVerdict{})
	st.ledger().Rebuild(true)
	st.downstreamChanged()
	if st.ledger().PassedOver(3) || st.getTally() != nil || st.telling().Reported() != nil || st.ledger().Rebuilding() || st.epoch() != 0 {
		t.Error("the state of a policy gone kept something")
	}
	if n := s.len(); n != 0 {
		t.Errorf("%d states kept after the policy left", n)
	}
	if first := s.enter(key).telling().Progress(2); !first || s.enter(key).telling().Progress(2) {
		t.Error("a policy entering again does not start from nothing, or marks a generation twice")
	}
}
