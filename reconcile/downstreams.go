package reconcile

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/ledger"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/queue"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// ownerOf reads the policy key from a cached object's annotation, which
// names the policy exactly (labels cut long names); a tombstone gives its
// object's.
func ownerOf(obj any) (policy.Key, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	c, ok := obj.(*cluster.Object)
	if !ok {
		return policy.Key{}, false
	}
	return policy.ParseKey(c.Owner())
}

// generatedEvents hands the generated objects' informers' events to the
// intake: a change to or deletion of one of those objects queues the
// policy that generated it, so drift is seen without polling.
type generatedEvents struct{ in *intake }

func (e generatedEvents) Added(o *cluster.Object, initial bool, store cache.Store) {
	in := e.in
	overlooked := in.created.Cached(o)
	key, ok := ownerOf(o)
	switch {
	case !ok || initial:
	case overlooked:
		// A sync of its trigger looked for it while it was on its way
		// here: it is looked at now.
		in.queueGenerated(key, o, 0)
	default:
		in.ledger.ConfirmLater(store, key, o)
	}
}

func (e generatedEvents) Changed(old, obj any) {
	e.departed(old, obj)
	e.requeue(old) // an edit may have changed its owner
	e.requeue(obj)
}

func (e generatedEvents) Deleted(obj any) {
	e.departed(obj, nil) // deleted, or its managed-by label removed
	e.requeue(obj)
}

// departed claims, for the policy that generated it, an object the
// downstream cache held as old and now holds as next, when next no longer
// carries old's origin (ledger.Departure).
func (e generatedEvents) departed(old, next any) {
	key, claim, ok := ledger.Departure(old, next)
	if !ok {
		return
	}
	e.in.policies(true, func(running map[policy.Key]*policy.Compiled) {
		cp := running[key]
		if cp == nil || !cp.Policy.PolicySpec().Synchronize() {
			return // a policy that does not synchronize never writes it again anyway
		}
		e.in.states.Of(key).Ledger().Claim(claim)
	})
}

func (e generatedEvents) requeue(obj any) {
	if key, ok := ownerOf(obj); ok {
		e.in.downstreamChanged(key)
		e.in.queueGenerated(key, obj, 0)
	}
}

// servedInProtobuf reports whether gvr's kind is one client-go's scheme
// knows, which the API server serves in protobuf.
func (in *intake) servedInProtobuf(gvr schema.GroupVersionResource) bool {
	gvk, err := in.kinds.KindFor(gvr)
	return err == nil && clientgoscheme.Scheme.Recognizes(gvk)
}

// queueGenerated queues the policy that generated obj, after d if d > 0:
// for the trigger obj was generated for, or whole if it names none.
func (in *intake) queueGenerated(key policy.Key, obj any, d time.Duration) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if o, ok := obj.(*cluster.Object); ok && o.TriggerUID() != "" {
		in.queue.AddTrigger(key, types.UID(o.TriggerUID()), queue.Change{}, d)
		return
	}
	if d > 0 {
		in.queue.AddAfter(key, d)
		return
	}
	in.queue.Add(key)
}

// resourcesOf maps the kinds of objs to their resources, passing over
// those in seen, which it adds them to: a sync maps each kind once. A kind
// the API server does not serve is an error for its objects alone: the
// resources of the others are still returned, so they are recorded before
// they are written.
func (in *intake) resourcesOf(objs []*unstructured.Unstructured, kinds []schema.GroupVersionKind, seen map[schema.GroupVersionKind]error) (sets.Set[schema.GroupVersionResource], error) {
	out := sets.New[schema.GroupVersionResource]()
	var errs []error
	var last *schema.GroupVersionKind
	for i, o := range objs {
		gvk := kinds[i]
		if _, ok := seen[gvk]; last != nil && gvk == *last || ok {
			continue // most often, every object is of one kind
		}
		last = &gvk
		m, err := in.kinds.Mapping(gvk)
		seen[gvk] = err
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", inventory.ObjectID(o), err))
			continue
		}
		out.Insert(m.Resource)
	}
	return out, errors.Join(errs...)
}

// downstreamChanged counts an update or deletion of one of key's objects:
// a settled evaluation confirmed at the same count has had none of its
// cached copies replaced, and needs no lookup to know it
// (evaluation.settledAt). Every count is followed by a sync of the
// policy, which checks in full.
func (in *intake) downstreamChanged(key policy.Key) { in.states.Of(key).DownstreamChanged() }

// downstreamEpoch is the count for key now.
func (in *intake) downstreamEpoch(key policy.Key) uint64 { return in.states.Of(key).Epoch() }

// forgetSettledChecks makes every settled evaluation check its objects in
// full at its next sync: a scheduled resync compares everything, in case
// an informer missed an event.
func (in *intake) forgetSettledChecks() {
	in.states.Each(func(_ policy.Key, st *policyState) { st.DownstreamChanged() })
}

// live serves inventory's lookups from the generated objects' caches.
func (in *intake) live() watches.Live {
	return in.generated.Live(func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
		m, err := in.kinds.Mapping(gvk)
		if err != nil {
			return schema.GroupVersionResource{}, err
		}
		return m.Resource, nil
	})
}
