package ledger

import (
	"k8s.io/apimachinery/pkg/util/sets"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// An object a policy generated is never a trigger of that same policy: a
// policy whose objects match its own rules would otherwise generate from
// them, and from what those generate, without end (bomb-a, bomb-bomb-a…).
// Its origin labels or its sprout.dev/policy annotation naming the policy
// mark such an object, but whoever writes a trigger can write those too,
// and would so take their trigger out of a platform's policy: the object
// must also be one the policy wrote (Entry.own), or, for a policy that
// does not synchronize, one its record says it generated for the trigger
// its label names. Removing the labels makes it the policy's claimed
// object (ownership.go), which a synchronizing policy labels again at
// once. Other policies still see it as a trigger: one policy's objects may
// trigger another's.

// LabelledBy reports whether the cached trigger u says, by its labels or
// annotation, that cp's policy generated it.
func LabelledBy(cp *policy.Compiled, u *cluster.Object) bool {
	p := cp.Policy
	if u.Owner() == celenv.PolicyRef(p) {
		return true
	}
	l := u.OriginLabels()
	if l == nil {
		return false
	}
	ns := ""
	if p.IsNamespaced() {
		ns = p.GetNamespace()
	}
	return l[sproutv1alpha1.LabelManagedBy] == sproutv1alpha1.ManagedBy && l[sproutv1alpha1.LabelPolicyName] == sproutv1alpha1.LabelValue(p.GetName()) &&
		l[sproutv1alpha1.LabelPolicyNamespace] == ns
}

// GeneratedBy reports whether the policy wrote u, whose labels say so
// (LabelledBy): it is among the objects the policy wrote while Sprout runs,
// or, for a policy that does not synchronize, among those its record says
// it generated for the trigger u's label names.
func (e *Entry) GeneratedBy(u *cluster.Object) bool {
	id := u.ID()
	if e.owns(id) {
		return true
	}
	return e.hasGenerated(generatedID(id, u.TriggerUID()))
}

// owns reports whether the policy wrote the object id while Sprout runs.
func (e *Entry) owns(id string) (yes bool) {
	e.with(func(e *Entry) { yes = e.own.Has(id) })
	return yes
}

// NoteOwn adds the objects changes show present, and takes out those
// deleted.
func (e *Entry) NoteOwn(changes inventory.ChangeSet) {
	e.with(func(e *Entry) {
		if e.own == nil {
			e.own = sets.New[string]()
		}
		for _, ch := range changes.Changes {
			switch {
			case ch.Action == inventory.Deleted:
				e.own.Delete(ch.ID)
			case ch.Action == inventory.Created || ch.Action == inventory.Unchanged || ch.Present():
				e.own.Insert(ch.ID)
			}
		}
	})
}

// PassedOver records that a sync passed over n of the policy's own objects
// as triggers and reports whether n differs from the last count: the core
// tells it then.
func (e *Entry) PassedOver(n int) (changed bool) {
	e.with(func(e *Entry) { changed, e.selfTriggers = e.selfTriggers != n, n })
	return changed
}

// MayTriggerItself reports whether the policy writes to one of its trigger
// resources: only then can its objects be its triggers. Asked at every
// sync, it reads the resources written in place rather than a copy.
func (e *Entry) MayTriggerItself(cp *policy.Compiled) (may bool) {
	e.with(func(e *Entry) {
		for _, gvr := range cp.Triggers {
			if e.written.Has(gvr) {
				may = true
				return
			}
		}
	})
	return may
}
