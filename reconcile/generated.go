package reconcile

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// notYetGenerated drops the objects a non-synchronizing policy has already
// generated: it generates once per trigger, so a downstream a user deleted
// stays deleted.
func (c *Controller) notYetGenerated(key policy.Key, desired []*unstructured.Unstructured) []*unstructured.Unstructured {
	st := c.states.of(key)
	var out []*unstructured.Unstructured
	for _, o := range desired {
		if !st.hasGenerated(generatedID(inventory.ObjectID(o), o.GetLabels()[sproutv1alpha1.LabelTriggerUID])) {
			out = append(out, o)
		}
	}
	return out
}

// noteGenerated remembers the objects created, or found already there.
func (c *Controller) noteGenerated(key policy.Key, changes inventory.ChangeSet) {
	var ids []string
	for _, ch := range changes.Changes {
		if ch.Action == inventory.Created || ch.Action == inventory.Unchanged || ch.Present() {
			ids = append(ids, generatedID(ch.ID, ch.TriggerUID))
		}
	}
	c.states.of(key).noteGenerated(ids...)
}

func generatedID(objectID, triggerUID string) string { return triggerUID + " " + objectID }

// retainGenerated forgets what was generated for triggers that no longer
// exist, once what they were generated from at their DELETE is done: a gone
// trigger generates nothing again, so the record, in etcd and in memory,
// grows with the live triggers, not with history. exists is asked without
// the lock held: it takes it.
func (c *Controller) retainGenerated(key policy.Key, exists func(string) bool) {
	ids := c.states.of(key).generatedIDs().UnsortedList()
	if len(ids) == 0 {
		return
	}
	pending := sets.New[string]()
	for _, t := range c.states.of(key).pendingTombstones() {
		pending.Insert(string(t.Object.GetUID()))
	}
	var gone []string
	for _, id := range ids {
		uid, _, _ := strings.Cut(id, " ")
		if !pending.Has(uid) && !exists(uid) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return
	}
	c.states.of(key).forgetGenerated(gone...)
}
