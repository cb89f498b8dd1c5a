package reconcile

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

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
	return in.watchKeyOf(cp.Scope(), w.GVR) == w && in.states.Of(key).ReadsFrom(w.GVR)
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
