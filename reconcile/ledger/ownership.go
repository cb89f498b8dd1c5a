package ledger

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// A synchronizing policy's objects are found by their labels, but labels
// are anyone's to edit who may edit the object: an object whose
// managed-by label is removed leaves the label-selected cache, and would
// be judged someone else's, never written again. So when one of a running
// synchronizing policy's objects leaves its origin (its labels or owner
// annotation changed or removed, or the object deleted), the policy claims
// its name for its trigger: the claim is kept in its Entry (generated),
// saved in the record's spec.generated, and a claimed object is written
// back, labels and content, whatever labels it carries
// (inventory.ApplyOptions.Claimed). A claim lasts while the policy wants
// the object.

// Claim is an object a policy claims for a trigger (Entry.Claim).
type Claim struct{ id string }

// Departure returns the claim that an object the downstream cache held as
// old and now holds as next (nil: gone from the cache) makes for the
// policy that generated it, when next no longer carries old's origin. The
// core decides whether the policy claims it (Entry.Claim): only a
// synchronizing policy writes it again.
func Departure(old, next any) (policy.Key, Claim, bool) {
	if t, ok := old.(cache.DeletedFinalStateUnknown); ok {
		old = t.Obj
	}
	o, ok := old.(*cluster.Object)
	if !ok {
		return policy.Key{}, Claim{}, false
	}
	n, _ := next.(*cluster.Object)
	if !o.Left(n) {
		return policy.Key{}, Claim{}, false
	}
	key, ok := policy.ParseKey(o.Owner())
	if !ok {
		return policy.Key{}, Claim{}, false
	}
	return key, Claim{id: generatedID(o.ID(), o.TriggerUID())}, true
}

// Claim keeps c, saved with the record.
func (e *Entry) Claim(c Claim) { e.noteGenerated(c.id) }

// Claims answers inventory's question for a policy: does its record claim
// the object id for the trigger?
func (e *Entry) Claims(triggerUID, id string) bool {
	return e.hasGenerated(generatedID(id, triggerUID))
}

// RetainClaims drops the claims of a synchronizing policy on objects its
// complete desired set (changes) no longer holds: pruned, or no longer
// generated. Given triggers, changes are what those triggers desire, and
// only their claims are looked at.
func (e *Entry) RetainClaims(changes inventory.ChangeSet, triggers sets.Set[string]) {
	claimed := e.generatedIDs()
	if claimed.Len() == 0 {
		return // the usual case: nothing built
	}
	desired := sets.New[string]()
	for _, ch := range changes.Changes {
		desired.Insert(generatedID(ch.ID, ch.TriggerUID))
	}
	var dropped []string
	for id := range claimed {
		uid, _, _ := strings.Cut(id, " ")
		if !desired.Has(id) && (triggers == nil || triggers.Has(uid)) {
			dropped = append(dropped, id)
		}
	}
	e.forgetGenerated(dropped...)
}
