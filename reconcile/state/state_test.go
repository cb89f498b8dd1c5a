package state

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// TestRoleChangeFindsItsPolicies: a change to a role finds the policies
// whose bindings referred to it at their last sync, and any ClusterRole's
// change those that bind an aggregated one; a policy whose last complete
// sync bound no role, or that left, is not found.
func TestRoleChangeFindsItsPolicies(t *testing.T) {
	byName, byRole, aggregating, other, gone := policy.Key{Name: "by-name"}, policy.Key{Name: "by-role"},
		policy.Key{Name: "aggregating"}, policy.Key{Name: "other"}, policy.Key{Name: "gone"}
	var s States
	refer := func(key policy.Key, aggregated, complete bool, names ...string) {
		s.Of(key).Bound(access.RoleRefs{Names: sets.New(names...), AnyClusterRole: aggregated}, complete)
	}
	found := func(role string, cluster bool) []string {
		var out []string
		s.Each(func(k policy.Key, st *State) {
			if st.BoundTo(role, cluster) {
				out = append(out, k.Name)
			}
		})
		slices.Sort(out)
		return out
	}
	for _, k := range []policy.Key{byName, byRole, aggregating, other, gone} {
		s.Enter(k)
	}
	refer(byName, false, true, "ClusterRole/widened")
	refer(byRole, false, true, "Role/ns/widened")
	refer(aggregating, true, true, "ClusterRole/aggregated")
	refer(other, false, true, "ClusterRole/other", "Role/other-ns/widened")
	refer(gone, false, true, "ClusterRole/widened")
	s.Drop(gone)

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

	// What its identity holds was judged: any RBAC change concerns it,
	// until a complete sync judges nothing so.
	s.Of(other).Bound(access.RoleRefs{Names: sets.New[string](), Held: true}, true)
	s.Of(other).Bound(access.RoleRefs{Names: sets.New[string]()}, false)
	if !s.Of(other).JudgedHeld() || s.Of(byRole).JudgedHeld() {
		t.Errorf("judged by what the identity holds: %v, and never: %v", s.Of(other).JudgedHeld(), s.Of(byRole).JudgedHeld())
	}
	s.Of(other).Bound(access.RoleRefs{Names: sets.New[string]()}, true)
	if s.Of(other).JudgedHeld() {
		t.Error("a complete sync that judged nothing keeps the policy judged by what its identity holds")
	}
}

// TestStateOfAPolicyGoneKeepsNothing: a sync that ends after its policy
// left writes to no state, and makes none: what it would keep is gone with
// the policy, and the states hold only the policies that run.
func TestStateOfAPolicyGoneKeepsNothing(t *testing.T) {
	var s States
	key := policy.Key{Name: "p"}
	s.Enter(key).SetTally(&Tally{})
	s.Of(key).Told().Granted(&report.Verdict{})
	s.Drop(key)
	st := s.Of(key)
	st.SetTally(&Tally{})
	st.Told().Granted(&report.Verdict{})
	st.Ledger().Rebuild(true)
	st.DownstreamChanged()
	if st.Ledger().PassedOver(3) || st.Tally() != nil || st.Told().Reported() != nil || st.Ledger().Rebuilding() || st.Epoch() != 0 {
		t.Error("the state of a policy gone kept something")
	}
	if n := s.Len(); n != 0 {
		t.Errorf("%d states kept after the policy left", n)
	}
	if first := s.Enter(key).Told().Progress(2); !first || s.Enter(key).Told().Progress(2) {
		t.Error("a policy entering again does not start from nothing, or marks a generation twice")
	}
}

// TestTallyCountsEachTriggerOnce: a trigger counted again replaces what it
// contributed; one removed takes its counts with it.
func TestTallyCountsEachTriggerOnce(t *testing.T) {
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	cp := &policy.Compiled{Triggers: []schema.GroupVersionResource{cms}, Evaluations: policy.NewEvaluations()}
	tl := NewTally(cp, []Contribution{
		{UID: "a", GVR: cms, Key: "ns/a", Objects: 2, Matched: true},
		{UID: "b", GVR: cms, Key: "ns/b", Objects: 1, Matched: true, Volatile: true},
	})
	tl.Add(Contribution{UID: "a", GVR: cms, Key: "ns/a", Objects: 3, Matched: true})
	if tl.Objects != 4 || tl.Matched != 2 || tl.Volatile != 1 || len(tl.ByUID) != 2 {
		t.Errorf("objects %d, matched %d, volatile %d, triggers %d; want 4, 2, 1, 2", tl.Objects, tl.Matched, tl.Volatile, len(tl.ByUID))
	}
	tl.Remove("b")
	tl.Remove("gone")
	if tl.Objects != 3 || tl.Matched != 1 || tl.Volatile != 0 || tl.ByUID["a"].GVR != 0 || tl.ByUID["a"].Key != "ns/a" {
		t.Errorf("after removing b: %+v", tl)
	}
}
