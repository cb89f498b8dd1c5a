package cluster

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync/atomic"
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// Object is one object as an informer's cache holds it, a trigger or one
// of Sprout's generated objects. What a sync reads of every cached object
// (its identity, version, creation and deletion, owner and the labels that
// decide pruning) is kept apart; the rest is kept as JSON, less the managed
// fields, and decoded only when a policy matches or evaluates the object,
// when a desired object is compared with it, or when it is deleted. As
// maps, objects take several times the memory of their JSON, almost all
// of it pointers for the garbage collector to scan at every cycle; the
// JSON is never scanned.
//
// An Object is never modified: an informer replaces it when its object
// changes, so its address stands for the version it holds. What it keeps
// of that version may shrink: once a generated object's version is known
// to hold a desired state entire (created as desired, or found so by a
// comparison), the JSON is released and only that state's stamp
// (AnnotationApplied) is kept, for a desired object with the same stamp
// needs nothing.
type Object struct {
	kind                             unique.Handle[schema.GroupVersionKind]
	namespace, name, resourceVersion string
	uid                              types.UID
	// created is the creationTimestamp in Unix seconds, its precision.
	created int64
	// owner is the policy that generated it: its AnnotationPolicy;
	// triggerUID, its LabelTriggerUID.
	owner, triggerUID string
	// chain is its AnnotationChain: the policies before its owner.
	chain    string
	deleting bool
	// onDelete: generated from a trigger's DELETE; clone: copied from a
	// source, as Kyverno tells it: the source-uid label is present, even
	// empty; createHeld: its fields are still held by the Update entry
	// a create of Sprout's left (they must be handed over before an apply);
	// written: Sprout wrote it, for its managed fields hold an entry of
	// Sprout's, its create's or an apply's. The managed fields are read
	// for generated objects only.
	onDelete, clone, createHeld, written bool
	// originWritten: Sprout wrote the labels and annotation that name its
	// origin (OriginWritten); read with the managed fields, except from a
	// protobuf watch when the proof proves the origin: every reader asks
	// for either.
	originWritten bool
	// proven: its AnnotationProof proves its identity and origin
	// (proof.go); verified once, at decode.
	proven bool
	// intact: its policy labels name the policy its owner annotation does.
	// One that stops being intact, or leaves the label-selected cache
	// while its object stays, had its labels edited.
	intact bool
	// apart are the metadata members the content lacks, which are kept
	// above and put back when it is decoded.
	apart identity
	// body is the rest: the JSON, or, once released, a stamp; a pending
	// version of Sprout's create (Form.fromTyped) holds its typed object
	// until it is read or released. A trigger's
	// is never released, so it lives in inline, which saves an allocation
	// for every event of the busiest informers.
	body   atomic.Pointer[body]
	inline body
}

// body is the rest of an Object: its JSON, less the managed fields and
// the members kept apart, or, once released, the stamp of the desired
// state it holds.
type body struct {
	content []byte
	holds   string
	// typed is a pending version's decoded object (Form.fromTyped), whose
	// JSON is content once read; it is never modified.
	typed runtime.Object
}

// json returns the content of o: its JSON, encoded now from a pending
// version's typed object if it was not yet (and kept, unless the version
// was released meanwhile). nil for a released object; content that fails
// to encode is nil too, and so decodes as a released object does.
func (o *Object) json() []byte {
	b := o.body.Load()
	if b.typed == nil {
		return b.content
	}
	content, err := json.Marshal(b.typed)
	if err != nil {
		return nil
	}
	o.body.CompareAndSwap(b, &body{content: content})
	return content
}

// Release drops the JSON of o, whose version holds entire the desired
// state stamped stamp: a desired object with that stamp needs nothing,
// and any other is decided from a read.
func (o *Object) Release(stamp string) {
	if stamp == "" {
		return
	}
	if b := o.body.Load(); b.content != nil || b.typed != nil || b.holds != stamp {
		o.body.Store(&body{holds: stamp})
	}
}

// Released returns the stamp of the desired state o holds once its JSON
// is released, and whether it is.
func (o *Object) Released() (string, bool) {
	b := o.body.Load()
	return b.holds, b.content == nil && b.typed == nil
}

// Decode decodes the object, less its managed fields; the result is the
// caller's. A released object gives what Sprout keeps of it: its identity,
// version, managed-by and trigger labels, and its policy and stamp
// annotations, enough to prune it. So does content that no longer decodes
// (it was encoded from maps, so never), which compares as changed.
func (o *Object) Decode() *unstructured.Unstructured {
	var m map[string]any
	content := o.json()
	b := o.body.Load()
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(content, &m); err != nil || m == nil {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(o.kind.Value())
		u.SetNamespace(o.namespace)
		u.SetName(o.name)
		u.SetUID(o.uid)
		u.SetResourceVersion(o.resourceVersion)
		if b.holds != "" {
			u.SetLabels(map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelTriggerUID: o.triggerUID})
			u.SetAnnotations(map[string]string{sproutv1alpha1.AnnotationPolicy: o.owner, sproutv1alpha1.AnnotationApplied: b.holds})
		}
		return u
	}
	o.putBack(m)
	return &unstructured.Unstructured{Object: m}
}

// Selectable returns what the admission matcher reads of the object: its
// identity and, withLabels, its labels, decoded alone. Content that does
// not decode gives the identity alone, as Decode does.
func (o *Object) Selectable(withLabels bool) *metav1.PartialObjectMetadata {
	gvk := o.kind.Value()
	p := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: o.name, UID: o.uid, ResourceVersion: o.resourceVersion},
	}
	if withLabels {
		var top struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(o.json(), &top); err == nil {
			p.Labels = top.Metadata.Labels
		}
	}
	return p
}

// policyLabelJSON is the key of LabelPolicyName in an object's JSON: an
// object without it needs no decoding for OriginLabels.
var policyLabelJSON = []byte(`"` + sproutv1alpha1.LabelPolicyName + `":`)

// OriginLabels returns the object's labels, decoded alone, when they may
// name a policy of Sprout's (LabelPolicyName), and nil otherwise: most
// objects, which then cost no decoding.
func (o *Object) OriginLabels() map[string]string {
	content := o.json()
	if !bytes.Contains(content, policyLabelJSON) {
		return nil
	}
	var top struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if sigsjson.UnmarshalCaseSensitivePreserveInts(content, &top) != nil {
		return nil
	}
	return top.Metadata.Labels
}

// Decoded returns the objects decoded (Decode), as a prune takes them.
func Decoded(objs []*Object) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.Decode())
	}
	return out
}

// Kind is the object's kind as it was read, as its one shared handle.
func (o *Object) Kind() unique.Handle[schema.GroupVersionKind] { return o.kind }

// GroupVersionKind is the object's kind, as it was read.
func (o *Object) GroupVersionKind() schema.GroupVersionKind { return o.kind.Value() }

func (o *Object) GetKind() string            { return o.kind.Value().Kind }
func (o *Object) GetAPIVersion() string      { return o.kind.Value().GroupVersion().String() }
func (o *Object) GetNamespace() string       { return o.namespace }
func (o *Object) GetName() string            { return o.name }
func (o *Object) GetUID() types.UID          { return o.uid }
func (o *Object) GetResourceVersion() string { return o.resourceVersion }

// Created is the object's creationTimestamp.
func (o *Object) Created() time.Time { return time.Unix(o.created, 0) }

// Deleting reports whether the object has a deletionTimestamp.
func (o *Object) Deleting() bool { return o.deleting }

// Owner is the object's AnnotationPolicy: the policy that generated it.
func (o *Object) Owner() string { return o.owner }

// TriggerUID is the object's LabelTriggerUID.
func (o *Object) TriggerUID() string { return o.triggerUID }

// OnDelete reports whether the object was generated from a trigger's
// DELETE (LabelGeneratedOnDelete).
func (o *Object) OnDelete() bool { return o.onDelete }

// Clone reports whether the object was copied from a source: it carries
// LabelSourceUID, even empty.
func (o *Object) Clone() bool { return o.clone }

// CreateHeld reports whether the Update entry a create of Sprout's left
// still holds the object's fields.
func (o *Object) CreateHeld() bool { return o.createHeld }

// Written reports whether Sprout wrote the object: its managed fields
// hold an entry of Sprout's (IsSproutEntry).
func (o *Object) Written() bool { return o.written }

// OriginWritten reports whether Sprout wrote the labels and annotation
// that name the object's origin: its managed fields give every one of them
// it carries, the managed-by label among them, to an entry of Sprout's
// (OriginWritten). Such an object is a policy's to write over: the labels
// alone may have been copied by anyone who may patch it. To prune it or
// claim it takes its proof (Proven): managed fields can be forged. It
// is not read, and false, for an object from a protobuf watch whose
// proof proves its origin: a caller asks for OriginWritten or Proven.
func (o *Object) OriginWritten() bool { return o.originWritten }

// Proven reports whether the object's proof (AnnotationProof) proves its
// identity and origin: Sprout signed them, under a key no client holds.
// Only such an object is a policy's to prune, to claim or to rebuild a
// lost record from, and a trigger one Sprout generated: its labels and
// managed fields may have been written by anyone who may patch it.
func (o *Object) Proven() bool { return o.proven }

// origin is what o's proof is made over, with chain its AnnotationChain.
func (o *Object) origin(chain string) origin {
	return origin{gk: o.kind.Value().GroupKind(), namespace: o.namespace, name: o.name, policy: o.owner, triggerUID: o.triggerUID, chain: chain}
}

// Chain returns the policies whose generated objects led to o, in order,
// its owner last: nil unless Sprout signed its origin (Proven), the chain
// among it. A chain copied onto an object, or an object a client wrote,
// starts none.
func (o *Object) Chain() []string {
	if !o.proven || o.owner == "" {
		return nil
	}
	if o.chain == "" {
		return []string{o.owner}
	}
	return append(strings.Split(o.chain, ","), o.owner)
}

// ID names the object as Kind/namespace/name, or Kind/name.
func (o *Object) ID() string {
	if o.namespace != "" {
		return o.kind.Value().Kind + "/" + o.namespace + "/" + o.name
	}
	return o.kind.Value().Kind + "/" + o.name
}

// Left reports whether next, the same object's next state in the cache
// (nil: gone from it), no longer carries the origin o did: its owner
// annotation, trigger label or policy labels were changed or removed. A
// label-selected cache loses an object whose managed-by label is removed.
// Only an origin Sprout wrote or signed can be left: one copied onto the
// object by someone else never made it the policy's.
func (o *Object) Left(next *Object) bool {
	if !o.intact || !o.originWritten && !o.proven {
		return false
	}
	return next == nil || !next.intact || next.owner != o.owner || next.triggerUID != o.triggerUID
}

// GetObjectMeta serves the informer's key functions (meta.Accessor), which
// call it several times for every event: the view it returns is o itself,
// so a call allocates nothing.
func (o *Object) GetObjectMeta() metav1.Object { return (*metaView)(o) }

// GetObjectKind serves runtime.Object: a watch event carries an Object.
func (o *Object) GetObjectKind() schema.ObjectKind { return fixedKind{o.kind.Value()} }

// DeepCopyObject returns o: an Object is never modified, so it is its own
// copy.
func (o *Object) DeepCopyObject() runtime.Object { return o }

// fixedKind is the kind of an Object, which does not change.
type fixedKind struct{ gvk schema.GroupVersionKind }

func (k fixedKind) SetGroupVersionKind(schema.GroupVersionKind) {}
func (k fixedKind) GroupVersionKind() schema.GroupVersionKind   { return k.gvk }

// Intern returns the one copy of s that every cached object shares: names,
// Namespaces and owners repeat across thousands of objects.
func Intern(s string) string { return unique.Make(s).Value() }

// KindOf returns obj's group, version and kind, read straight from its
// top-level fields: unstructured's accessors walk a path for each, and a
// sync asks for every desired object several times.
func KindOf(obj *unstructured.Unstructured) schema.GroupVersionKind {
	apiVersion, _ := obj.Object["apiVersion"].(string)
	kind, _ := obj.Object["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionKind{Kind: kind}
	}
	return gv.WithKind(kind)
}
