package ledger

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// Start starts the informer on PolicyInventory records. Records are read
// from its cache and written only when what they hold changed; shardSize
// is inventory.NewRecords'.
func (l *Ledger) Start(ctx context.Context, shardSize int) cache.DoneChecker {
	inf := dynamicinformer.NewFilteredDynamicInformer(l.dyn, sproutv1alpha1.PolicyInventories, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	// Nothing reads a record's managed fields, and each read copies the
	// record: a sync reads its policy's twice.
	_ = inf.SetTransform(withoutManagedFields)
	l.records = inventory.NewRecords(l.dyn, inf.GetStore(), shardSize)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: l.recordDeleted})
	go inf.RunWithContext(ctx)
	return inf.HasSyncedChecker()
}

// withoutManagedFields drops an object's managed fields before a cache
// keeps it.
func withoutManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Ref is the reference a record makes to the policy key.
func Ref(key policy.Key) sproutv1alpha1.PolicyReference {
	return sproutv1alpha1.PolicyReference{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name}
}

// Record returns the cached record of a policy, or nil.
func (l *Ledger) Record(key policy.Key) *sproutv1alpha1.PolicyInventory {
	rec, err := l.records.Get(Ref(key))
	if err != nil {
		l.log.Error("record cannot be read", "policy", key.String(), "error", err.Error())
		return nil
	}
	return rec
}

// Restore loads into e what the record remembers of a policy Sprout has
// not run since it started: the resources it wrote to, and, when the
// record is of the same policy object (same UID), the triggers events
// admitted and what it has generated. A policy deleted and created again
// under the same name starts afresh but still finds the objects of its
// predecessor.
//
// A policy without a record, or whose record is still being rebuilt,
// rebuilds it from its objects before it prunes anything (rebuild.go).
func (l *Ledger) Restore(key policy.Key, uid string, e *Entry) {
	rec := l.Record(key)
	if rec == nil || rec.Labels[LabelRebuilding] != "" {
		e.Rebuild(true)
	}
	if rec == nil {
		return
	}
	e.RestoreWritten(rec)
	// Whatever policy object the record was of: its objects are those a
	// new revision would overwrite or delete.
	e.SetApplied(rec.Spec.Applied, rec.Spec.AppliedObjects)
	if rec.Spec.Policy.UID != uid {
		return
	}
	e.restoreGenerated(rec.Spec.Generated)
	for _, t := range rec.Spec.Admitted {
		e.Admit(types.UID(t))
	}
	e.predate(rec.Spec.Predating)
	if rec.Spec.Derived != nil {
		e.SetDerivedBy(*rec.Spec.Derived)
	}
}

// saveStamp is what a save wrote from: the policy's settings, the
// entry's changes and the record's generations as the cache held them
// after. The same stamp again means the same record.
type saveStamp struct {
	policy      policyStamp
	changes     uint64
	generations string
}

// policyStamp is what a record holds of the compiled policy.
type policyStamp struct {
	uid, source, revision, activatedVersion string
	synchronize, orphan                     bool
	activated                               int64
	derives                                 sproutv1alpha1.DerivedAdmissions
}

func stampOf(cp *policy.Compiled) policyStamp {
	spec := cp.Policy.PolicySpec()
	return policyStamp{uid: string(cp.Policy.GetUID()), source: cp.Source, revision: cp.Revision, activatedVersion: cp.ActivatedVersion,
		synchronize: spec.Synchronize(), orphan: spec.OrphanDownstreamOnPolicyDelete(), activated: cp.Activated.UnixNano(), derives: cp.Derives}
}

// Save writes the policy's record, from cp and e, if what it should hold
// changed. A sync saves it before each part it applies: when neither the
// policy, nor the entry, nor the record's spec (its generation) changed
// since the last save, the record is not built again, which costs a list
// of every trigger admitted and a comparison of every entry.
func (l *Ledger) Save(ctx context.Context, key policy.Key, cp *policy.Compiled, e *Entry) error {
	ref := Ref(key)
	var changes uint64
	var saved saveStamp
	e.with(func(e *Entry) { changes, saved = e.changes, e.saved })
	stamp := saveStamp{policy: stampOf(cp), changes: changes, generations: l.records.Generations(ref)}
	if stamp.generations != "" && stamp == saved {
		return nil
	}
	if err := l.save(ctx, key, cp, e); err != nil {
		return err
	}
	// Read again: a write the cache has not seen yet leaves it as it was,
	// and the next save compares once more. Without a cached record there
	// is no stamp: one deleted before the cache saw it is written again.
	stamp.generations = l.records.Generations(ref)
	e.with(func(e *Entry) { e.saved = stamp })
	return nil
}

func (l *Ledger) save(ctx context.Context, key policy.Key, cp *policy.Compiled, e *Entry) error {
	rec := &sproutv1alpha1.PolicyInventory{}
	spec := cp.Policy.PolicySpec()
	rec.Labels = map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy}
	if e.Rebuilding() {
		rec.Labels[LabelRebuilding] = "true"
	}
	applied, appliedObjects := e.Applied()
	rec.Spec = sproutv1alpha1.PolicyInventorySpec{
		Policy:         sproutv1alpha1.PolicyReference{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name, UID: string(cp.Policy.GetUID())},
		Source:         cp.Source,
		Revision:       cp.Revision,
		Applied:        applied,
		AppliedObjects: appliedObjects,
		Synchronize:    spec.Synchronize(),
		Orphan:         spec.OrphanDownstreamOnPolicyDelete(),
		Activated:      &metav1.Time{Time: cp.Activated},
		Admitted:       e.admittedList(),

		ActivatedVersion: cp.ActivatedVersion,
		Predating:        e.predatingList(),
	}
	derived, ok := e.DerivedBy()
	if !ok {
		derived = cp.Derives // nothing was derived before
	}
	rec.Spec.Derived = &derived
	for gvr := range e.Written() {
		rec.Spec.Resources = append(rec.Spec.Resources, sproutv1alpha1.Resource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource})
	}
	rec.Spec.Generated = e.generatedIDs().UnsortedList()
	return l.records.Save(ctx, rec)
}

// SaveStatus writes the outcome of a sync to the record's status if it
// changed; request is the policy's reconcile request token, "" for none.
func (l *Ledger) SaveStatus(ctx context.Context, key policy.Key, cp *policy.Compiled, out report.Outcome, request string) error {
	if out.Reason == report.ReasonProgressing && l.Record(key) == nil {
		return nil // a first sync under way has no record yet
	}
	err := l.records.UpdateStatus(ctx, Ref(key), func(status *sproutv1alpha1.PolicyInventoryStatus) {
		report.SetConditions(&status.Conditions, cp.Policy.GetGeneration(), out)
		if out.Reason == report.ReasonProgressing {
			return
		}
		if out.Counted() {
			status.Triggers, status.Objects = out.Triggers, out.Objects
		}
		if request != "" && out.Reason != report.ReasonSuspended {
			status.LastHandledReconcileAt = request
		}
	})
	if apierrors.IsNotFound(err) {
		// No record yet: the policy failed before its sync wrote one (an
		// account without rights, say). Its status says so; the sync that
		// writes the record hands over its outcome after it.
		return nil
	}
	return err
}

// Delete removes the record of a policy gone, and its shards.
func (l *Ledger) Delete(ctx context.Context, ref sproutv1alpha1.PolicyReference) error {
	return l.records.Delete(ctx, ref)
}

// Records lists every record, shards merged; a record that cannot be
// read is logged and left out.
func (l *Ledger) Records() []*sproutv1alpha1.PolicyInventory {
	recs, err := l.records.List()
	if err != nil {
		l.log.Error("records cannot be read", "error", err.Error())
	}
	return recs
}

// KeyOf is the key of the policy rec records.
func KeyOf(rec *sproutv1alpha1.PolicyInventory) policy.Key {
	p := rec.Spec.Policy
	return policy.Key{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}
}

// recordDeleted queues the policy whose record, or a shard of it, was
// deleted: its sync writes it again.
func (l *Ledger) recordDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	var key policy.Key
	key.Kind, _, _ = unstructured.NestedString(u.Object, "spec", "policy", "kind")
	key.Namespace, _, _ = unstructured.NestedString(u.Object, "spec", "policy", "namespace")
	key.Name, _, _ = unstructured.NestedString(u.Object, "spec", "policy", "name")
	if l.core.Running(key) {
		l.log.Info("record deleted: written again", "policy", key.String(), "record", u.GetName())
		l.core.Queue(key)
	}
}
