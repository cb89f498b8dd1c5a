package policy

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

// A policy's objectSelector is pushed into the list and watch of its
// trigger informers, so that the API server sends only the objects it
// selects: a policy on the ConfigMaps labelled role=trigger then caches
// those alone, not every ConfigMap of the cluster (its own copies among
// them), and the others' events never reach it. Label selectors have no
// OR, so each selector has informers of its own, shared by the policies
// that have the same one; a policy without one, or whose events a filtered
// watch would misreport, is served by the unfiltered informer, as are
// resource.Get and resource.List (docs/decisions.md, "Trigger informers
// per objectSelector").

// maxPushedSelector bounds the label selector an informer sends in the URL
// of each list and watch: a longer one is matched by Sprout instead.
const maxPushedSelector = 4 << 10

// PushedSelector is the label selector cp's trigger informers list and
// watch with, "" for all objects. A filtered watch tells an UPDATE that
// takes an object into its selection as an ADDED event, and one that takes
// it out as a DELETED event, which the core replays as a CREATE and a
// DELETE. The selector is pushed only where that replay decides what the
// UPDATE would have:
//   - the resource rules admit on CREATE and UPDATE alike, and never on
//     DELETE (a DELETE leaves a tombstone to generate from);
//   - the program reads neither oldObject nor request, which would show a
//     CREATE where a webhook saw an UPDATE;
//   - the policy synchronizes: a non-synchronizing one remembers what it
//     generated for a trigger while the trigger exists, which a filtered
//     cache cannot tell beyond its selection.
func PushedSelector(cp *Compiled) string {
	spec := cp.Policy.PolicySpec()
	mc := spec.MatchConstraints
	crit := cp.Criteria.State
	if mc == nil || mc.ObjectSelector == nil || crit.ObjErr != nil || crit.Objects == nil || crit.Objects.Empty() {
		return ""
	}
	if !spec.Synchronize() || cp.Program.ReadsEvent() || !admitsAlike(mc) {
		return ""
	}
	s := crit.Objects.String()
	if len(s) > maxPushedSelector {
		return ""
	}
	return s
}

// admitsAlike reports whether mc's rules decide a CREATE as they decide
// an UPDATE, and admit no DELETE.
func admitsAlike(mc *admissionregistrationv1.MatchResources) bool {
	names := func(ops []admissionregistrationv1.OperationType) (create, update, del bool) {
		s := sets.New(ops...)
		all := s.Has(admissionregistrationv1.OperationAll)
		return all || s.Has(admissionregistrationv1.Create), all || s.Has(admissionregistrationv1.Update), all || s.Has(admissionregistrationv1.Delete)
	}
	for _, r := range mc.ResourceRules {
		if create, update, del := names(r.Operations); !create || !update || del {
			return false
		}
	}
	for _, r := range mc.ExcludeResourceRules {
		if create, update, _ := names(r.Operations); create != update {
			return false
		}
	}
	return true
}

// Listed returns crit, one of cp's criteria, for a trigger its informers
// listed: where they list only what the policy's object selector selects
// (Selector), the API server has matched that selector already, and a
// trigger's labels need not be decoded to match it again.
func (cp *Compiled) Listed(crit MatchCriteria) MatchCriteria {
	if cp.Selector != "" {
		crit.Objects = labels.Everything()
	}
	return crit
}
