package reconcile

import (
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
	"github.com/sprout-gitops/sprout/reconcile/watches"
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

// pushedSelector is the label selector cp's trigger informers list and
// watch with, "" for all objects. A filtered watch tells an UPDATE that
// takes an object into its selection as an ADDED event, and one that takes
// it out as a DELETED event, which onTrigger replays as a CREATE and a
// DELETE. The selector is pushed only where that replay decides what the
// UPDATE would have:
//   - the resource rules admit on CREATE and UPDATE alike, and never on
//     DELETE (a DELETE leaves a tombstone to generate from);
//   - the program reads neither oldObject nor request, which would show a
//     CREATE where a webhook saw an UPDATE;
//   - the policy synchronizes: a non-synchronizing one remembers what it
//     generated for a trigger while the trigger exists, which a filtered
//     cache cannot tell beyond its selection.
func pushedSelector(cp *policy.Compiled) string {
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

// triggerKeyOf is the informer that serves gvr to cp as a trigger
// resource: the one of cp's pushed selector.
func (in *intake) triggerKeyOf(cp *policy.Compiled, gvr schema.GroupVersionResource) watchKey {
	w := in.watchKeyOf(cp.Scope(), gvr)
	w.Selector = cp.Selector
	return w
}

// triggerKeys are the informers of cp's trigger resources.
func (in *intake) triggerKeys(cp *policy.Compiled) []watchKey {
	keys := make([]watchKey, 0, len(cp.Triggers))
	for _, gvr := range cp.Triggers {
		keys = append(keys, in.triggerKeyOf(cp, gvr))
	}
	return keys
}

// triggeredBy reports whether informer w serves cp's triggers. The caller
// holds the policies' lock.
func (in *intake) triggeredBy(cp *policy.Compiled, w watchKey) bool {
	return in.triggerKeyOf(cp, w.GVR) == w && slices.Contains(cp.Triggers, w.GVR)
}

// readsFrom reports whether informer w serves what the policy's last sync
// read: always an unfiltered one. The caller holds the policies' lock.
func (in *intake) readsFrom(key policy.Key, cp *policy.Compiled, w watchKey) bool {
	return in.watchKeyOf(cp.Scope(), w.GVR) == w && in.states.of(key).readsFrom(w.GVR)
}

// informerSizes counts the objects of every running informer's cache.
func (in *intake) informerSizes() []report.InformerSize {
	var out []report.InformerSize
	for w, n := range in.triggers.Sizes() {
		out = append(out, report.InformerSize{Kind: "trigger", Resource: w.Resource(), Selector: w.Selector, Objects: n})
	}
	for gvr, n := range in.generated.Sizes() {
		out = append(out, report.InformerSize{Kind: "generated", Resource: resourceName(gvr), Selector: watches.GeneratedSelector, Objects: n})
	}
	return out
}

// runningInformers counts the running informers of kind: "trigger" (on
// triggers and what expressions read) or "generated".
func (in *intake) runningInformers(kind string) int {
	if kind == "trigger" {
		return len(in.triggers.Sizes())
	}
	return len(in.generated.Sizes())
}
