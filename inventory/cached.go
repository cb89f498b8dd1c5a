package inventory

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"unique"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// Cached is one of Sprout's objects as the controller's caches hold it.
// What a sync reads of every cached object (its identity, version, owner
// and the labels that decide pruning) is kept apart; the rest is kept as
// JSON, less the managed fields, and decoded only when a desired object
// is compared with it or when it is deleted. As a map an object takes
// several times the memory of its JSON, almost all of it pointers for the
// garbage collector to scan; none of the JSON is scanned.
//
// The version a Cached holds never changes: an informer replaces it when
// its object changes, so its address stands for that version. What it
// keeps of it may shrink: once the version is known to hold a desired
// state entire (created as desired, or found so by a comparison), the JSON
// is released and only that state's stamp (sproutv1alpha1.AnnotationApplied) is kept, for
// a desired object with the same stamp needs nothing (the stamp is the
// desired object's string, so it costs nothing more).
type Cached struct {
	kind                                  unique.Handle[schema.GroupVersionKind]
	namespace, name, uid, resourceVersion string
	// owner is the policy that generated it: its sproutv1alpha1.AnnotationPolicy;
	// triggerUID, its sproutv1alpha1.LabelTriggerUID.
	owner, triggerUID string
	// onDelete: generated from a trigger's DELETE; clone: copied from a
	// source, as Kyverno tells it: the source-uid label is present, even
	// empty; createHeld: its fields are still held by the Update entry
	// a create of Sprout's left (they must be handed over before an apply);
	// written: Sprout wrote it, for its managed fields hold an entry of
	// Sprout's, its create's or an apply's (decideOwner).
	onDelete, clone, createHeld, written bool
	// intact: its policy labels name the policy its owner annotation does.
	// One that stops being intact, or leaves the label-selected cache
	// while its object stays, had its labels edited.
	intact bool
	body   atomic.Pointer[cachedBody]
}

// cachedBody is the rest of a Cached's object: its JSON, less the managed
// fields, or, once released, the stamp of the desired state it holds.
type cachedBody struct {
	content []byte
	holds   string
}

func (c *Cached) setContent(content []byte) { c.body.Store(&cachedBody{content: content}) }

// release drops the JSON of c, whose version holds entire the desired
// state stamped stamp. Sprout's own syncs compare nothing more with it:
// a desired object with that stamp needs nothing, any other is decided
// from a read (decideReleased).
func (c *Cached) release(stamp string) {
	if stamp == "" {
		return
	}
	if b := c.body.Load(); b.content != nil || b.holds != stamp {
		c.body.Store(&cachedBody{holds: stamp})
	}
}

// released returns the stamp of the desired state c holds once its JSON
// is released, and whether it is.
func (c *Cached) released() (string, bool) {
	b := c.body.Load()
	return b.holds, b.content == nil
}

// NewCached returns obj as a cache holds it. obj itself loses its managed
// fields: it is the informer's to give away.
func NewCached(obj *unstructured.Unstructured) (*Cached, error) {
	m := metadataStrings(obj, "")
	labels, annotations := metadataStrings(obj, "labels"), metadataStrings(obj, "annotations")
	c := &Cached{
		kind:            unique.Make(KindOf(obj)),
		namespace:       intern(m.get("namespace")),
		name:            intern(m.get("name")),
		uid:             m.get("uid"),
		resourceVersion: m.get("resourceVersion"),
		owner:           intern(annotations.get(sproutv1alpha1.AnnotationPolicy)),
		triggerUID:      labels.get(sproutv1alpha1.LabelTriggerUID),
		onDelete:        labels.get(sproutv1alpha1.LabelGeneratedOnDelete) != "",
		clone:           labels.has(sproutv1alpha1.LabelSourceUID),
		createHeld:      heldByCreate(obj),
		written:         writtenBySprout(obj),
		intact:          originIntact(annotations.get(sproutv1alpha1.AnnotationPolicy), labels.get(sproutv1alpha1.LabelPolicyName), labels.get(sproutv1alpha1.LabelPolicyNamespace)),
	}
	delete(m, "managedFields")
	content, err := json.Marshal(obj.Object)
	c.setContent(content)
	return c, err
}

// CachedFromJSON returns the object raw encodes, as a watch sends it, as a
// cache holds it, without decoding it into maps: the fields syncs read are
// decoded alone, and the managed fields are cut out of raw as they are.
// raw becomes the Cached's. An object whose managed fields cannot be told
// apart in raw goes through NewCached.
func CachedFromJSON(raw []byte) (*Cached, error) {
	var top struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   cachedMetadata `json:"metadata"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &top); err != nil {
		return nil, err
	}
	md := top.Metadata
	content, m, err := WithoutManagedFields(raw, md.ManagedFields)
	if err != nil {
		return nil, err
	}
	if m != nil {
		return NewCached(&unstructured.Unstructured{Object: m})
	}
	c := &Cached{
		kind:            unique.Make(schema.FromAPIVersionAndKind(top.APIVersion, top.Kind)),
		namespace:       intern(md.Namespace),
		name:            intern(md.Name),
		uid:             md.UID,
		resourceVersion: md.ResourceVersion,
		owner:           intern(md.Annotations.Policy),
		triggerUID:      md.Labels.TriggerUID,
		onDelete:        md.Labels.GeneratedOnDelete != "",
		clone:           md.Labels.SourceUID != nil,
		intact:          originIntact(md.Annotations.Policy, md.Labels.PolicyName, md.Labels.PolicyNamespace),
	}
	c.setContent(content)
	if len(md.ManagedFields) > 0 {
		var entries []managedEntry
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(md.ManagedFields, &entries); err != nil {
			return nil, err
		}
		c.createHeld = slices.ContainsFunc(entries, managedEntry.isCreate)
		c.written = slices.ContainsFunc(entries, managedEntry.isSprouts)
	}
	return c, nil
}

// cachedIdentity returns obj, a typed object as a protobuf watch decoded
// it, as a cache holds it, without its content: the fields syncs read,
// taken from its metadata.
func cachedIdentity(obj runtime.Object) (*Cached, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	labels, annotations := m.GetLabels(), m.GetAnnotations()
	return &Cached{
		kind:            unique.Make(obj.GetObjectKind().GroupVersionKind()),
		namespace:       intern(m.GetNamespace()),
		name:            intern(m.GetName()),
		uid:             string(m.GetUID()),
		resourceVersion: m.GetResourceVersion(),
		owner:           intern(annotations[sproutv1alpha1.AnnotationPolicy]),
		triggerUID:      labels[sproutv1alpha1.LabelTriggerUID],
		onDelete:        labels[sproutv1alpha1.LabelGeneratedOnDelete] != "",
		clone:           hasKey(labels, sproutv1alpha1.LabelSourceUID),
		createHeld:      slices.ContainsFunc(m.GetManagedFields(), isCreateEntry),
		written:         slices.ContainsFunc(m.GetManagedFields(), isSproutEntry),
		intact:          originIntact(annotations[sproutv1alpha1.AnnotationPolicy], labels[sproutv1alpha1.LabelPolicyName], labels[sproutv1alpha1.LabelPolicyNamespace]),
	}, nil
}

// originIntact reports whether the policy labels of an object name the
// policy its sproutv1alpha1.AnnotationPolicy does (Kind/name or Kind/namespace/name). It
// runs for every object a watch brings: no allocation, and a label value
// equal to the name needs no encoding.
func originIntact(policy, label, namespace string) bool {
	_, rest, ok := strings.Cut(policy, "/")
	if !ok {
		return false
	}
	ns, name, namespaced := strings.Cut(rest, "/")
	if !namespaced {
		ns, name = "", rest
	}
	return namespace == ns && (label == name || label == sproutv1alpha1.LabelValue(name))
}

// encode sets c's content: obj, of which c is made, as JSON without its
// managed fields, as CachedFromJSON keeps it. obj loses its managed fields.
func (c *Cached) encode(obj runtime.Object) error {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	content, err := json.Marshal(obj)
	c.setContent(content)
	return err
}

// cachedMetadata is what CachedFromJSON decodes of an object's metadata.
// The tags are sproutv1alpha1.LabelGeneratedOnDelete, sproutv1alpha1.LabelSourceUID, sproutv1alpha1.LabelTriggerUID and
// sproutv1alpha1.AnnotationPolicy (TestCachedFromJSONAgreesWithNewCached holds them to
// each other).
type cachedMetadata struct {
	Name            string `json:"name"`
	Namespace       string `json:"namespace"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
	Labels          struct {
		GeneratedOnDelete string  `json:"sprout.dev/generated-on-delete"`
		SourceUID         *string `json:"generate.kyverno.io/source-uid"` // present, even empty: a clone
		TriggerUID        string  `json:"generate.kyverno.io/trigger-uid"`
		PolicyName        string  `json:"generate.kyverno.io/policy-name"`
		PolicyNamespace   string  `json:"sprout.dev/policy-namespace"`
	} `json:"labels"`
	Annotations struct {
		Policy string `json:"sprout.dev/policy"`
	} `json:"annotations"`
	ManagedFields json.RawMessage `json:"managedFields"`
}

// managedEntry is what CachedFromJSON decodes of a managed-fields entry.
type managedEntry struct {
	Manager     string                            `json:"manager"`
	Operation   metav1.ManagedFieldsOperationType `json:"operation"`
	Subresource string                            `json:"subresource"`
}

func (e managedEntry) isCreate() bool {
	return isCreateEntry(metav1.ManagedFieldsEntry{Manager: e.Manager, Operation: e.Operation, Subresource: e.Subresource})
}

func (e managedEntry) isSprouts() bool {
	return isSproutEntry(metav1.ManagedFieldsEntry{Manager: e.Manager, Operation: e.Operation, Subresource: e.Subresource})
}

// WithoutManagedFields returns raw, an object's JSON, less its metadata's
// managedFields member, whose value is managedFields as it is in raw. When
// that member is not found exactly once (a member elsewhere of that name
// and value would make the cut ambiguous), it returns raw decoded into a
// map instead, for the caller to make its form of. The controller's
// trigger caches cut their objects the same way.
func WithoutManagedFields(raw, managedFields json.RawMessage) ([]byte, map[string]any, error) {
	if len(managedFields) == 0 {
		return raw, nil, nil
	}
	member := make([]byte, 0, len(`"managedFields":`)+len(managedFields))
	member = append(append(member, `"managedFields":`...), managedFields...)
	from, to, ok := MemberSpan(raw, member)
	if !ok {
		var m map[string]any
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &m); err != nil {
			return nil, nil, err
		}
		return nil, m, nil
	}
	out := make([]byte, 0, len(raw)-(to-from))
	out = append(out, raw[:from]...)
	return append(out, raw[to:]...), nil, nil
}

// MemberSpan returns where member, an object member's JSON, is in raw,
// with the comma that separates it from a neighbour, when it is there
// exactly once: then it is the member looked for, however deep (inside
// strings, quotes are escaped, so only members can match).
//
// A member is found by its key first, which is short: bytes.Index is fast
// for short needles and slow for long ones (a Namespace's managed fields
// are a few hundred bytes), and the key found once answers for the member.
func MemberSpan(raw, member []byte) (from, to int, ok bool) {
	key := member
	if i := bytes.Index(member, []byte(`":`)); i > 0 {
		key = member[:i+2]
	}
	from = bytes.Index(raw, key)
	if from < 0 {
		return 0, 0, false
	}
	if !bytes.HasPrefix(raw[from:], member) {
		from = bytes.Index(raw, member)
	}
	if from < 0 || (bytes.Contains(raw[from+1:], key) && bytes.Contains(raw[from+1:], member)) {
		return 0, 0, false
	}
	to = from + len(member)
	switch {
	case from > 0 && raw[from-1] == ',':
		from--
	case to < len(raw) && raw[to] == ',':
		to++
	}
	return from, to, true
}

// intern returns the one copy of s that every cached object shares: names,
// Namespaces and owners repeat across thousands of objects.
func intern(s string) string { return unique.Make(s).Value() }

// Object decodes the object, less its managed fields. The result is the
// caller's. A released object gives what Sprout keeps of it: its identity,
// version, managed-by and trigger labels, and its policy and stamp
// annotations, enough to prune it. So does content that no longer decodes
// (it was encoded by NewCached, so never), which compares as changed.
func (c *Cached) Object() *unstructured.Unstructured {
	var m map[string]any
	b := c.body.Load()
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(b.content, &m); err != nil || m == nil {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(c.kind.Value())
		u.SetNamespace(c.namespace)
		u.SetName(c.name)
		u.SetUID(types.UID(c.uid))
		u.SetResourceVersion(c.resourceVersion)
		if b.holds != "" {
			u.SetLabels(map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelTriggerUID: c.triggerUID})
			u.SetAnnotations(map[string]string{sproutv1alpha1.AnnotationPolicy: c.owner, sproutv1alpha1.AnnotationApplied: b.holds})
		}
		return u
	}
	return &unstructured.Unstructured{Object: m}
}

// GetObjectMeta serves the informer's key functions (meta.Accessor).
func (c *Cached) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: c.namespace, Name: c.name, UID: types.UID(c.uid), ResourceVersion: c.resourceVersion}
}

// GetObjectKind serves runtime.Object: a watch event carries a Cached.
func (c *Cached) GetObjectKind() schema.ObjectKind { return cachedKind{c.kind.Value()} }

// DeepCopyObject returns c: a Cached is never modified, so it is its own
// copy.
func (c *Cached) DeepCopyObject() runtime.Object { return c }

// cachedKind is the kind of a Cached, which does not change.
type cachedKind struct{ gvk schema.GroupVersionKind }

func (k cachedKind) SetGroupVersionKind(schema.GroupVersionKind) {}
func (k cachedKind) GroupVersionKind() schema.GroupVersionKind   { return k.gvk }

// GroupVersionKind is the object's kind, as it was read.
func (c *Cached) GroupVersionKind() schema.GroupVersionKind { return c.kind.Value() }

func (c *Cached) GetNamespace() string       { return c.namespace }
func (c *Cached) GetName() string            { return c.name }
func (c *Cached) GetResourceVersion() string { return c.resourceVersion }

// Owner is the object's sproutv1alpha1.AnnotationPolicy: the policy that generated it.
func (c *Cached) Owner() string { return c.owner }

// TriggerUID is the object's sproutv1alpha1.LabelTriggerUID.
func (c *Cached) TriggerUID() string { return c.triggerUID }

// ID names the object as ObjectID does.
func (c *Cached) ID() string {
	if c.namespace != "" {
		return c.kind.Value().Kind + "/" + c.namespace + "/" + c.name
	}
	return c.kind.Value().Kind + "/" + c.name
}

// Left reports whether next, the same object's next state in the cache
// (nil: gone from it), no longer carries the origin c did: its owner
// annotation, trigger label or policy labels were changed or removed. A
// label-selected cache loses an object whose managed-by label is removed.
func (c *Cached) Left(next *Cached) bool {
	if !c.intact {
		return false
	}
	return next == nil || !next.intact || next.owner != c.owner || next.triggerUID != c.triggerUID
}

func (c *Cached) key() objectKey { return objectKey{c.kind.Value().GroupKind(), c.namespace, c.name} }

// Decoded returns the objects decoded (Object), as Prune takes them.
func Decoded(cached []*Cached) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(cached))
	for _, c := range cached {
		out = append(out, c.Object())
	}
	return out
}
