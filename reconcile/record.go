package reconcile

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// retired is a policy gone from its source whose objects may still need
// cleaning up: what its last sync needs to know.
type retired struct {
	ref                 sproutv1alpha1.PolicyReference
	synchronize, orphan bool
	// account is the ServiceAccount the policy ran as, which prunes what
	// it leaves; zero for Sprout's own.
	account access.Account
}

// startRecords starts the informer on PolicyInventory records. Records are
// read from its cache and written only when what they hold changed.
func (c *Controller) startRecords(ctx context.Context) cache.DoneChecker {
	inf := dynamicinformer.NewFilteredDynamicInformer(c.dynamic, sproutv1alpha1.PolicyInventories, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	// Nothing reads a record's managed fields, and each read copies the
	// record: a sync reads its policy's twice.
	_ = inf.SetTransform(withoutManagedFields)
	c.records = inventory.NewRecords(c.dynamic, inf.GetStore(), c.opts.RecordShardSize)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: c.recordDeleted})
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

func refOf(key policy.Key) sproutv1alpha1.PolicyReference {
	return sproutv1alpha1.PolicyReference{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name}
}

// record returns the cached record of a policy, or nil.
func (c *Controller) record(key policy.Key) *sproutv1alpha1.PolicyInventory {
	rec, err := c.records.Get(refOf(key))
	if err != nil {
		c.log.Error("record cannot be read", "policy", key.String(), "error", err.Error())
		return nil
	}
	return rec
}

// restore loads what the record remembers of a policy Sprout has not run
// since it started: the resources it wrote to, and, when the record is of
// the same policy object (same UID), the triggers events admitted and what
// it has generated. A policy deleted and created again under the same name
// starts afresh but still finds the objects of its predecessor.
//
// A policy without a record, or whose record is still being rebuilt,
// rebuilds it from its objects before it prunes anything (rebuild.go).
func (c *Controller) restore(key policy.Key, uid string) {
	rec := c.record(key)
	if rec == nil || rec.Labels[LabelRebuilding] != "" {
		c.states.of(key).rebuild(true)
	}
	if rec == nil {
		return
	}
	st := c.states.of(key)
	st.restoreWritten(recordedResources(rec))
	if rec.Spec.Policy.UID != uid {
		return
	}
	st.restoreGenerated(rec.Spec.Generated)
	for _, t := range rec.Spec.Admitted {
		c.states.of(key).admit(types.UID(t))
	}
	if rec.Spec.Derived != nil {
		c.states.of(key).setDerivedBy(*rec.Spec.Derived)
	}
}

// saveRecord writes the policy's record if what it should hold changed.
func (c *Controller) saveRecord(ctx context.Context, key policy.Key, cp *policy.Compiled) error {
	rec := &sproutv1alpha1.PolicyInventory{}
	spec := cp.Policy.PolicySpec()
	rec.Labels = map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy}
	if c.states.of(key).rebuildPending() {
		rec.Labels[LabelRebuilding] = "true"
	}
	rec.Spec = sproutv1alpha1.PolicyInventorySpec{
		Policy:      sproutv1alpha1.PolicyReference{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name, UID: string(cp.Policy.GetUID())},
		Source:      cp.Source,
		Revision:    cp.Revision,
		Synchronize: spec.Synchronize(),
		Orphan:      spec.OrphanDownstreamOnPolicyDelete(),
		Activated:   &metav1.Time{Time: cp.Activated},
		Admitted:    c.states.of(key).admittedList(),
	}
	derived, ok := c.states.of(key).derivedBy()
	if !ok {
		derived = cp.Derives // nothing was derived before
	}
	rec.Spec.Derived = &derived
	st := c.states.of(key)
	for gvr := range st.writtenTo() {
		rec.Spec.Resources = append(rec.Spec.Resources, sproutv1alpha1.Resource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource})
	}
	rec.Spec.Generated = st.generatedIDs().UnsortedList()
	return c.records.Save(ctx, rec)
}

// saveRecordStatus writes the outcome of a sync to the record's status if
// it changed.
func (c *Controller) saveRecordStatus(ctx context.Context, key policy.Key, cp *policy.Compiled, out outcome) error {
	if out.Reason == ReasonProgressing && c.record(key) == nil {
		return nil // a first sync under way has no record yet
	}
	err := c.records.UpdateStatus(ctx, refOf(key), func(status *sproutv1alpha1.PolicyInventoryStatus) {
		report.SetConditions(&status.Conditions, cp.Policy.GetGeneration(), out)
		if out.Reason == ReasonProgressing {
			return
		}
		if out.Counted() {
			status.Triggers, status.Objects = out.Triggers, out.Objects
		}
		if request := reconcileRequest(cp.Policy); request != "" && out.Reason != ReasonSuspended {
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

// retireOrphanRecords queues the records of policies that source no longer
// holds: deleted while Sprout was not running. It runs once a source has
// delivered a whole revision; records of sources not configured now are
// left alone (a source dropped from the flags is not a mass deletion), and
// so are those of policies another shard selects.
func (c *Controller) retireOrphanRecords(source string) {
	recs, err := c.records.List()
	if err != nil {
		c.log.Error("records cannot be read", "error", err.Error())
	}
	for _, rec := range recs {
		if rec.Spec.Source != source {
			continue
		}
		p := rec.Spec.Policy
		key := policy.Key{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}
		c.mu.Lock()
		_, running := c.policies[key]
		c.mu.Unlock()
		if !running && c.otherShards(source, key) {
			continue
		}
		if !running {
			// It enters to leave: its last sync prunes what the record
			// says it wrote to.
			c.states.enter(key).restoreWritten(recordedResources(rec))
			c.mu.Lock()
			c.deleted[key] = retired{ref: p, synchronize: rec.Spec.Synchronize, orphan: rec.Spec.Orphan}
			c.mu.Unlock()
		}
		if !running {
			c.log.Info("policy gone while Sprout was stopped", "policy", key.String())
			c.queue.Add(key)
		}
	}
}

// recordedResources are the resources a record names as written to.
func recordedResources(rec *sproutv1alpha1.PolicyInventory) sets.Set[schema.GroupVersionResource] {
	written := sets.New[schema.GroupVersionResource]()
	for _, r := range rec.Spec.Resources {
		written.Insert(schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource})
	}
	return written
}
