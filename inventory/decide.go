package inventory

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
)

// decision is what was found for one object: an action when it needs no
// write; for an object another of Sprout's policies owns, that policy (its
// sprout.dev/policy annotation); for one to write, whether its fields must
// be handed over from the create's entry first; whether the object must be
// read to decide (its cached copy is released).
type decision struct {
	action  Action
	reason  string
	owner   string
	handOff bool
	read    bool
	// reclaim: the object is claimed by the policy's record but its labels
	// say otherwise; it is written whatever else it holds.
	reclaim bool
}

// decideRead tells whether an object the cache does not hold must be
// written, from its metadata read from the API server: it is absent,
// someone else's, or Sprout's and not cached yet.
func (a *Applier) decideRead(ctx context.Context, obj *unstructured.Unstructured, opts ApplyOptions) (decision, error) {
	existing, err := a.metadata(ctx, obj)
	if err != nil || existing == nil {
		return decision{}, err
	}
	annotations := stringsOf(existing.GetAnnotations())
	wrote := sproutWrote{object: slices.ContainsFunc(existing.GetManagedFields(), cluster.IsSproutEntry),
		origin: cluster.OriginWritten(existing.GetManagedFields(), existing.GetLabels(), existing.GetAnnotations())}
	d := decideOwner(obj, stringsOf(existing.GetLabels()), annotations, wrote, opts)
	if d.action != "" {
		return d, nil
	}
	if !d.reclaim && annotations.get(sproutv1alpha1.AnnotationApplied) == metadataStrings(obj, "annotations").get(sproutv1alpha1.AnnotationApplied) {
		// Written from this very desired state and not cached yet (most
		// often, created by the sync before, a moment ago): the cache will
		// hold it, and any change made to it is an event that queues its
		// policy again, to be compared then.
		return decision{action: Unchanged}, nil
	}
	return decision{handOff: slices.ContainsFunc(existing.GetManagedFields(), cluster.IsCreateEntry) &&
		mayDrop(annotations.get(sproutv1alpha1.AnnotationApplied), obj)}, nil
}

// decideCached decides from the cached state of obj.
func decideCached(obj *unstructured.Unstructured, cached *cluster.Object, opts ApplyOptions) decision {
	wrote := sproutWrote{object: cached.Written(), origin: cached.OriginWritten() || cached.Proven()}
	if holds, ok := cached.Released(); ok {
		return decideReleased(obj, holds, wrote, opts)
	}
	live := cached.Decode()
	if d := decideOwner(obj, metadataStrings(live, "labels"), metadataStrings(live, "annotations"), wrote, opts); d.action != "" {
		return d
	}
	if covers(live, obj) {
		return decision{action: Unchanged}
	}
	return decision{handOff: cached.CreateHeld() && mayDrop(metadataStrings(live, "annotations").get(sproutv1alpha1.AnnotationApplied), obj)}
}

// decideReleased decides for obj from a cached copy that holds entire the
// desired state stamped holds, of which nothing else is kept: obj, with
// that stamp, is that state, found as it was (and, for a policy that does
// not synchronize, left as it is). Any other state is decided from a read,
// as an object not cached is: what is needed to compare it was released.
// Its managed fields were read before (wrote): a version is released only
// once Sprout's create made it or a decision found it the policy's.
func decideReleased(obj *unstructured.Unstructured, holds string, wrote sproutWrote, opts ApplyOptions) decision {
	annotations := metadataStrings(obj, "annotations")
	if annotations.get(sproutv1alpha1.AnnotationApplied) != holds {
		return decision{read: true}
	}
	if d := decideOwner(obj, metadataStrings(obj, "labels"), annotations, wrote, opts); d.action != "" {
		return d
	}
	return decision{action: Unchanged}
}

// mayDrop reports whether applying obj over an object last written with
// stamp applied (its sproutv1alpha1.AnnotationApplied) may remove a field, so that the
// fields a create of Sprout's still holds must be handed over first: a
// field the create's Update entry keeps would otherwise stay. Only another
// desired state can drop a field. The same one (the object changed by
// another writer, to be put back) cannot, so it is applied in one request;
// the create's entry stays until the desired state changes. A create's
// entry holds the fields of the state created, and an apply of any other
// state hands it over first, so a stamp equal to obj's means that the
// entry holds no field obj lacks.
func mayDrop(applied string, obj *unstructured.Unstructured) bool {
	return applied != metadataStrings(obj, "annotations").get(sproutv1alpha1.AnnotationApplied)
}

// sproutWrote is what an object's managed fields say of Sprout's writes:
// object, that they hold an entry of Sprout's (cluster.IsSproutEntry);
// origin, that Sprout's entries hold the labels and annotation naming its
// origin (cluster.OriginWritten) or that its proof proves it.
type sproutWrote struct{ object, origin bool }

// decideOwner returns the decision for an object that exists with labels
// and annotations when it must not be written: another owner's, or, for a
// policy that does not synchronize, any that exists. wrote says what its
// managed fields tell of Sprout's writes.
//
// The labels are not the last word. They make an object the policy's only
// where Sprout wrote them (wrote.origin): anyone who may patch an object
// may copy them onto it (proof.go). And anyone who may edit an object may
// remove a label, and would otherwise turn synchronization off for it. An
// object the policy's record claims (ApplyOptions.Claimed) is the policy's
// whatever its labels say; so, for a synchronizing policy, is one Sprout
// wrote that names no other origin (adoptable): its labels were removed
// where nobody saw them go, while Sprout was stopped.
func decideOwner(obj *unstructured.Unstructured, labels, annotations stringMap, wrote sproutWrote, opts ApplyOptions) decision {
	desired := metadataStrings(obj, "labels")
	labelled := sameOrigin(labels, desired) || orphanedByTrigger(labels, desired, opts.Alive)
	own := labelled && wrote.origin
	reclaim := !own && (opts.Claimed != nil && opts.Claimed(desired.get(sproutv1alpha1.LabelTriggerUID), ObjectID(obj)) ||
		opts.Synchronize && wrote.object && adoptable(obj, labels, annotations, opts.Alive))
	switch {
	case !own && !reclaim:
		d := decision{action: Skipped, reason: notOwnedReason(labels)}
		if labelled {
			d.reason = reasonCopiedOrigin
		}
		if labels.get(sproutv1alpha1.LabelManagedBy) == sproutv1alpha1.ManagedBy && annotations.get(sproutv1alpha1.AnnotationPolicy) != metadataStrings(obj, "annotations").get(sproutv1alpha1.AnnotationPolicy) {
			d.owner = annotations.get(sproutv1alpha1.AnnotationPolicy)
		}
		return d
	case !opts.Synchronize:
		return decision{action: Skipped, reason: reasonPresent}
	}
	return decision{reclaim: reclaim}
}

// change is the change of an object decided without a write.
func (d decision) change(obj *unstructured.Unstructured) Change {
	ch := changeOf(obj, d.action, d.reason)
	ch.Owner = d.owner
	return ch
}

// metadata reads the object's metadata, or nil when it does not exist.
func (a *Applier) metadata(ctx context.Context, obj *unstructured.Unstructured) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(obj.GroupVersionKind())
	err := a.client.Get(ctx, client.ObjectKeyFromObject(obj), m)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return m, nil
}

// reasonCopiedOrigin names an object that carries the policy's origin
// labels, which Sprout did not write.
const reasonCopiedOrigin = "carries the policy's labels, which Sprout did not write"

// originLabels identify who generated an object.
var originLabels = []string{sproutv1alpha1.LabelManagedBy, sproutv1alpha1.LabelPolicyName, sproutv1alpha1.LabelPolicyNamespace, sproutv1alpha1.LabelTriggerUID}

// stringMap is an object's labels or annotations as they are in it, read
// without a copy.
type stringMap map[string]any

func (m stringMap) get(key string) string {
	s, _ := m[key].(string)
	return s
}

// metadataStrings returns obj's metadata.<field> (labels, annotations), or
// with field "" its metadata.
func metadataStrings(obj *unstructured.Unstructured, field string) stringMap {
	m, _ := obj.Object["metadata"].(map[string]any)
	if field == "" {
		return m
	}
	sm, _ := m[field].(map[string]any)
	return sm
}

func stringsOf(m map[string]string) stringMap {
	out := make(stringMap, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sameOrigin(existing, desired stringMap) bool {
	for _, k := range originLabels {
		if existing.get(k) != desired.get(k) {
			return false
		}
	}
	return true
}

// orphanedByTrigger reports whether existing belongs to the same policy as
// desired but to a trigger that no longer exists.
func orphanedByTrigger(existing, desired stringMap, alive func(string) bool) bool {
	if alive == nil {
		return false
	}
	for _, k := range []string{sproutv1alpha1.LabelManagedBy, sproutv1alpha1.LabelPolicyName, sproutv1alpha1.LabelPolicyNamespace} {
		if existing.get(k) != desired.get(k) {
			return false
		}
	}
	return !alive(existing.get(sproutv1alpha1.LabelTriggerUID))
}

func notOwnedReason(existing stringMap) string {
	switch {
	case existing.get(sproutv1alpha1.LabelManagedBy) != sproutv1alpha1.ManagedBy:
		return "exists and is not managed by Sprout"
	case existing.get(sproutv1alpha1.LabelPolicyName) == "":
		return "exists without a policy label"
	default:
		policy := existing.get(sproutv1alpha1.LabelPolicyName)
		if ns := existing.get(sproutv1alpha1.LabelPolicyNamespace); ns != "" {
			policy = ns + "/" + policy
		}
		return fmt.Sprintf("owned by policy %s for trigger %s", policy, existing.get(sproutv1alpha1.LabelTriggerUID))
	}
}
