package inventory

import (
	"encoding/json"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"
)

// Cached is one of Sprout's objects as the controller's caches hold it.
// What a sync reads of every cached object (its identity, version, owner
// and the labels that decide pruning) is kept apart; the rest is kept as
// JSON, less the managed fields, and decoded only when a desired object
// is compared with it or when it is deleted. As a map an object took about
// 2.9 KB, almost all of it pointers for the garbage collector to scan; as
// JSON it takes about a third of that, none of which is scanned.
//
// A Cached is never modified: an informer replaces it when its object
// changes, so its address stands for the version it holds.
type Cached struct {
	gvk                                   schema.GroupVersionKind
	namespace, name, uid, resourceVersion string
	// owner is the policy that generated it: its AnnotationPolicy.
	owner string
	// onDelete: generated from a trigger's DELETE; clone: copied from a
	// source; createHeld: its fields are still held by the Update entry
	// a create of Sprout's left (they must be handed over before an apply).
	onDelete, clone, createHeld bool
	content                     []byte
}

// NewCached returns obj as a cache holds it. obj itself loses its managed
// fields: it is the informer's to give away.
func NewCached(obj *unstructured.Unstructured) (*Cached, error) {
	m := metadataStrings(obj, "")
	labels, annotations := metadataStrings(obj, "labels"), metadataStrings(obj, "annotations")
	c := &Cached{
		gvk:             interned(KindOf(obj)),
		namespace:       intern(m.get("namespace")),
		name:            intern(m.get("name")),
		uid:             m.get("uid"),
		resourceVersion: m.get("resourceVersion"),
		owner:           intern(annotations.get(AnnotationPolicy)),
		onDelete:        labels.get(LabelGeneratedOnDelete) != "",
		clone:           labels.get(LabelSourceUID) != "",
		createHeld:      heldByCreate(obj),
	}
	delete(m, "managedFields")
	var err error
	c.content, err = json.Marshal(obj.Object)
	return c, err
}

// intern returns the one copy of s that every cached object shares: names,
// Namespaces, kinds and owners repeat across thousands of objects.
func intern(s string) string { return unique.Make(s).Value() }

func interned(gvk schema.GroupVersionKind) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: intern(gvk.Group), Version: intern(gvk.Version), Kind: intern(gvk.Kind)}
}

// Object decodes the object, less its managed fields. The result is the
// caller's. Content that no longer decodes (it was encoded by NewCached,
// so never) gives the object's identity alone, which compares as changed.
func (c *Cached) Object() *unstructured.Unstructured {
	var m map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(c.content, &m); err != nil || m == nil {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(c.gvk)
		u.SetNamespace(c.namespace)
		u.SetName(c.name)
		u.SetUID(types.UID(c.uid))
		u.SetResourceVersion(c.resourceVersion)
		return u
	}
	return &unstructured.Unstructured{Object: m}
}

// GetObjectMeta serves the informer's key functions (meta.Accessor).
func (c *Cached) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: c.namespace, Name: c.name, UID: types.UID(c.uid), ResourceVersion: c.resourceVersion}
}

// GroupVersionKind is the object's kind, as it was read.
func (c *Cached) GroupVersionKind() schema.GroupVersionKind { return c.gvk }

func (c *Cached) GetNamespace() string       { return c.namespace }
func (c *Cached) GetName() string            { return c.name }
func (c *Cached) GetResourceVersion() string { return c.resourceVersion }

// Owner is the object's AnnotationPolicy: the policy that generated it.
func (c *Cached) Owner() string { return c.owner }

func (c *Cached) key() objectKey { return objectKey{c.gvk.GroupKind(), c.namespace, c.name} }

// Decoded returns the objects decoded (Object), as Prune takes them.
func Decoded(cached []*Cached) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(cached))
	for _, c := range cached {
		out = append(out, c.Object())
	}
	return out
}
