package ledger

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// A policy's record holds what Sprout cannot see in the cluster: which
// triggers it admitted, and, for a policy from files, when it began. A
// record lost (deleted by someone, while Sprout ran or not) must never make
// Sprout prune what the policy generated for triggers it still matches.
//
// A record deleted while Sprout runs queues its policy, whose sync writes
// it again from memory. A policy that starts without a record is
// rebuilding: it prunes nothing until its objects, found by their labels
// in the resources it writes to, have told which triggers it generated
// for. Those are admitted again, and a policy from files begins again at
// the earliest of them. The record says so with LabelRebuilding until
// then, so that a restart in between rebuilds again rather than trusting a
// record written from nothing.

// LabelRebuilding marks the record of a policy whose admissions are being
// rebuilt from its objects; it prunes nothing meanwhile.
const LabelRebuilding = "sprout.dev/rebuilding"

// Relearn reads, from owned (the objects the policy owns in the resources
// it has written to so far), the triggers it generated for, and admits
// those that still exist (created: when each cached trigger was) and that
// its settings do not admit. A policy without a creationTimestamp (from
// files) begins, at the latest, when the earliest of them was created.
// It returns that beginning when it is earlier than cp's (zero otherwise),
// for the core to take, and how many triggers it admitted.
func (e *Entry) Relearn(cp *policy.Compiled, owned []*cluster.Object, created map[types.UID]time.Time) (began time.Time, admitted int) {
	var named []types.UID
	earliest := cp.Activated
	for _, o := range inventory.Proven(owned) { // copied labels, forged managed fields tell nothing
		uid := types.UID(o.TriggerUID())
		t, ok := created[uid]
		if !ok {
			continue // gone: its objects go the usual way
		}
		named = append(named, uid)
		if t.Before(earliest) {
			earliest = t
		}
	}
	activated := cp.Activated
	if cp.Policy.GetCreationTimestamp().Time.IsZero() && earliest.Before(cp.Activated) {
		began, activated = earliest, earliest
	}
	for _, uid := range named {
		// Its objects say it was admitted: listed unless its settings
		// admit it wherever it falls in the activation second, where
		// the policy's version places the triggers of that second.
		derived := policy.Derived(cp.Derives, created[uid], activated, policy.Unknown)
		if cp.ActivatedVersion != "" {
			derived = policy.Derived(cp.Derives, created[uid], activated, policy.Before) &&
				policy.Derived(cp.Derives, created[uid], activated, policy.After)
		}
		if !derived && !e.IsAdmitted(uid) {
			e.Admit(uid)
			admitted++
		}
	}
	return began, admitted
}

// Owned lists, from the caches, the objects the policy generated in the
// resources it has written to (in its namespace, for a namespaced one).
func (l *Ledger) Owned(key policy.Key) ([]*cluster.Object, error) {
	return l.ownedIn(key, watches.ByOwner, key.String())
}

// OwnedBy lists, from the caches, the objects the policy generated for
// the triggers uids.
func (l *Ledger) OwnedBy(key policy.Key, uids []types.UID) ([]*cluster.Object, error) {
	wanted := make(sets.Set[string], len(uids))
	values := make([]string, 0, len(uids))
	for _, uid := range uids {
		wanted.Insert(string(uid))
		values = append(values, watches.TriggerBucket(string(uid)))
	}
	slices.Sort(values)
	objs, err := l.ownedIn(key, watches.ByTrigger, slices.Compact(values)...)
	// A bucket holds other triggers' objects too, and other policies'.
	owner := key.String()
	return slices.DeleteFunc(objs, func(o *cluster.Object) bool {
		return !wanted.Has(o.TriggerUID()) || o.Owner() != owner
	}), err
}

// Holds returns what tells whether the caches hold an object the policy
// generated for a trigger, in the resources it had written to when Holds
// was called. One look-up per resource and trigger, without allocating a
// list: a full sync asks it of every trigger it matches.
func (l *Ledger) Holds(key policy.Key) func(uid types.UID) bool {
	written, owner := l.core.Entry(key).Written().UnsortedList(), key.String()
	return func(uid types.UID) bool {
		bucket := watches.TriggerBucket(string(uid))
		for _, gvr := range written {
			objs, _ := l.cache.ByIndex(gvr, watches.ByTrigger, bucket)
			for _, o := range objs {
				if o := o.(*cluster.Object); o.TriggerUID() == string(uid) && o.Owner() == owner && inScope(key, o) {
					return true
				}
			}
		}
		return false
	}
}

// inScope reports whether the policy key may have written o. A
// NamespacedGeneratingPolicy writes only in its namespace: what carries
// its origin elsewhere was stamped by someone else.
func inScope(key policy.Key, o *cluster.Object) bool {
	return key.Namespace == "" || o.GetNamespace() == key.Namespace
}

// ownedIn lists the policy's cached objects that index holds under values.
func (l *Ledger) ownedIn(key policy.Key, index string, values ...string) ([]*cluster.Object, error) {
	written := l.core.Entry(key).Written().UnsortedList()
	var out []*cluster.Object
	for _, gvr := range written {
		for _, v := range values {
			objs, err := l.cache.ByIndex(gvr, index, v)
			if err != nil {
				return nil, err
			}
			for _, o := range objs {
				if o := o.(*cluster.Object); inScope(key, o) {
					out = append(out, o)
				}
			}
		}
	}
	return out, nil
}

// OwnedLive lists, from the API server rather than the caches, the objects
// the policy generated in the resources it has written to: the last sync
// of a deleted policy must find the objects a sync stopped by the deletion
// wrote a moment ago, which the caches may not hold yet.
func (l *Ledger) OwnedLive(ctx context.Context, key policy.Key) ([]*cluster.Object, error) {
	written := l.core.Entry(key).Written().UnsortedList()
	selector := labels.Set{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelPolicyName: sproutv1alpha1.LabelValue(key.Name)}
	if key.Namespace != "" {
		selector[sproutv1alpha1.LabelPolicyNamespace] = key.Namespace
	}
	var out []*cluster.Object
	for _, gvr := range written {
		// A NamespacedGeneratingPolicy writes only in its namespace: what
		// carries its labels elsewhere is not its own.
		list, err := l.dyn.Resource(gvr).Namespace(key.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if key.Namespace != "" && apierrors.IsNotFound(err) {
			continue // a cluster-scoped resource: nothing of the policy's
		}
		if err != nil {
			return nil, fmt.Errorf("%s: list: %w", watches.ResourceName(gvr), err)
		}
		for i := range list.Items {
			o, err := cluster.Generated(nil).WithProof(l.proof).FromList(&unstructured.Unstructured{Object: list.Items[i].Object})
			if err != nil {
				return nil, err
			}
			if owner, ok := policy.ParseKey(o.Owner()); ok && owner == key {
				out = append(out, o)
			}
		}
	}
	return out, nil
}
