package ledger

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// generatedID names an object generated for a trigger, as the record's
// spec.generated lists it.
func generatedID(objectID, triggerUID string) string { return triggerUID + " " + objectID }

// hasGenerated reports whether the policy generated or claims id.
func (e *Entry) hasGenerated(id string) (yes bool) {
	e.with(func(e *Entry) { yes = e.generated.Has(id) })
	return yes
}

// generatedIDs returns what the policy generated or claims.
func (e *Entry) generatedIDs() (out sets.Set[string]) {
	e.with(func(e *Entry) { out = e.generated.Clone() })
	return out
}

// noteGenerated adds ids to what the policy generated or claims.
func (e *Entry) noteGenerated(ids ...string) {
	e.change(func(e *Entry) bool {
		if e.generated == nil {
			e.generated = sets.New[string]()
		}
		before := e.generated.Len()
		e.generated.Insert(ids...)
		return e.generated.Len() != before
	})
}

// forgetGenerated removes ids from what the policy generated or claims.
func (e *Entry) forgetGenerated(ids ...string) {
	e.change(func(e *Entry) bool {
		before := e.generated.Len()
		e.generated.Delete(ids...)
		return e.generated.Len() != before
	})
}

// restoreGenerated takes what a record names as generated, unless the
// policy's syncs have recorded their own.
func (e *Entry) restoreGenerated(ids []string) {
	e.change(func(e *Entry) bool {
		if e.generated != nil {
			return false
		}
		e.generated = sets.New(ids...)
		return true
	})
}

// NotYetGenerated drops the objects a non-synchronizing policy has already
// generated: it generates once per trigger, so a downstream a user deleted
// stays deleted.
func (e *Entry) NotYetGenerated(desired []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range desired {
		if !e.hasGenerated(generatedID(inventory.ObjectID(o), o.GetLabels()[sproutv1alpha1.LabelTriggerUID])) {
			out = append(out, o)
		}
	}
	return out
}

// NoteGenerated remembers the objects created, or found already there.
func (e *Entry) NoteGenerated(changes inventory.ChangeSet) {
	var ids []string
	for _, ch := range changes.Changes {
		if ch.Action == inventory.Created || ch.Action == inventory.Unchanged || ch.Present() {
			ids = append(ids, generatedID(ch.ID, ch.TriggerUID))
		}
	}
	e.noteGenerated(ids...)
}

// RetainGenerated forgets what was generated for triggers that no longer
// exist, once what they were generated from at their DELETE is done
// (pending gives the UIDs of the deleted triggers not generated from yet):
// a gone trigger generates nothing again, so the record, in etcd and in
// memory, grows with the live triggers, not with history. pending and
// exists are asked without the lock held: they may take the core's.
func (e *Entry) RetainGenerated(pending func() sets.Set[string], exists func(string) bool) {
	ids := e.generatedIDs().UnsortedList()
	if len(ids) == 0 {
		return
	}
	tombstoned := pending()
	var gone []string
	for _, id := range ids {
		uid, _, _ := strings.Cut(id, " ")
		if !tombstoned.Has(uid) && !exists(uid) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return
	}
	e.forgetGenerated(gone...)
}

// NoteOwned remembers as generated the objects the caches show the policy
// owns now, whose origin Sprout signed (a claim): when its synchronize is switched
// off, it generates none of them again, also one deleted before its first
// sync without synchronize, which would otherwise find it missing and
// create it.
func (l *Ledger) NoteOwned(key policy.Key) error {
	objs, err := l.Owned(key)
	ids := make([]string, 0, len(objs))
	for _, o := range objs {
		if o.Proven() && o.TriggerUID() != "" {
			id := o.GetKind() + "/" + o.GetName()
			if ns := o.GetNamespace(); ns != "" {
				id = o.GetKind() + "/" + ns + "/" + o.GetName()
			}
			ids = append(ids, generatedID(id, o.TriggerUID()))
		}
	}
	l.core.Entry(key).noteGenerated(ids...)
	return err
}
