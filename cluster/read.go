package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
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

// Form is how an informer's cache makes its Objects: of a watch event's
// JSON, without decoding it into maps; of a protobuf watch event's typed
// object; or of an object a list gave.
type Form struct {
	// generated: the cache holds Sprout's own objects, whose names repeat
	// across namespaces and whose managed fields say who wrote them.
	// Otherwise (triggers) the identity members are cut out of the
	// content, which is a good part of a small object.
	generated bool
	// created pairs the versions Sprout's creates made with the events
	// that bring them; nil pairs nothing.
	created *CreatedVersions
	// proof verifies the objects' proofs (proof.go).
	proof *ProofKey
}

// Triggers is the form of the caches of triggers and of what programs
// read.
var Triggers = Form{}

// Generated is the form of the caches of Sprout's own objects: a version
// one of its creates made as desired (created) is kept released.
func Generated(created *CreatedVersions) Form { return Form{generated: true, created: created} }

// WithProof returns f verifying the proofs of its objects with k.
func (f Form) WithProof(k *ProofKey) Form {
	f.proof = k
	return f
}

// FromList returns u, as a list gave it, as a cache of f holds it, and
// pairs nothing: a list shows versions older than the creates under way.
// u itself loses its managed fields: it is the informer's to give away.
func (f Form) FromList(u *unstructured.Unstructured) (*Object, error) {
	md, _ := u.Object["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	annotations, _ := md["annotations"].(map[string]any)
	policy := str(annotations, sproutv1alpha1.AnnotationPolicy)
	_, clone := labels[sproutv1alpha1.LabelSourceUID]
	o := &Object{
		kind:            unique.Make(KindOf(u)),
		namespace:       Intern(str(md, "namespace")),
		name:            f.name(str(md, "name")),
		uid:             types.UID(str(md, "uid")),
		resourceVersion: str(md, "resourceVersion"),
		created:         u.GetCreationTimestamp().Unix(),
		deleting:        u.GetDeletionTimestamp() != nil,
		owner:           Intern(policy),
		chain:           str(annotations, sproutv1alpha1.AnnotationChain),
		triggerUID:      str(labels, sproutv1alpha1.LabelTriggerUID),
		onDelete:        str(labels, sproutv1alpha1.LabelGeneratedOnDelete) != "",
		clone:           clone,
		intact:          originIntact(policy, str(labels, sproutv1alpha1.LabelPolicyName), str(labels, sproutv1alpha1.LabelPolicyNamespace)),
	}
	if f.generated || policy != "" {
		// A trigger that names a policy is told apart as one Sprout
		// generated only where Sprout wrote that origin; others keep
		// no managed fields.
		entries := listedEntries(md)
		if f.generated {
			o.createHeld = slices.ContainsFunc(entries, managedEntry.isCreate)
			o.written = slices.ContainsFunc(entries, managedEntry.isSprouts)
		}
		o.originWritten = originWritten(carriedOrigin(str(labels, sproutv1alpha1.LabelManagedBy) != "", str(labels, sproutv1alpha1.LabelPolicyName),
			str(labels, sproutv1alpha1.LabelPolicyNamespace), o.triggerUID, policy, o.chain), writtenBySprout(entries))
	}
	o.proven = f.proof.proves(str(annotations, AnnotationProof), o.origin(o.chain), str(labels, sproutv1alpha1.LabelManagedBy) != "", o.originWritten)
	delete(md, "managedFields")
	content, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	f.setContent(o, content)
	return o, nil
}

// FromJSON returns the object raw encodes, as a watch sends it, as a cache
// of f holds it, without decoding it into maps: the fields syncs read are
// decoded alone, and the managed fields are cut out of raw as they are.
// raw becomes the Object's. An object whose managed fields cannot be told
// apart in raw is made as FromList makes it.
func (f Form) FromJSON(raw []byte) (*Object, error) {
	o, err := f.fromJSON(raw, nil)
	if err != nil {
		return nil, err
	}
	f.created.watch(o)
	return o, nil
}

// fromJSON makes the Object of raw, as FromJSON does, and pairs nothing.
// An item of a list of a built-in type comes without its apiVersion and
// kind, which then are listed's, written into raw: the content a trigger
// is evaluated on has them.
func (f Form) fromJSON(raw []byte, listed *listedKind) (*Object, error) {
	var top struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Metadata   metadata `json:"metadata"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &top); err != nil {
		return nil, err
	}
	if listed != nil && top.APIVersion == "" && top.Kind == "" {
		var err error
		if raw, err = listed.withKind(raw); err != nil {
			return nil, err
		}
		top.APIVersion, top.Kind = listed.gvk.ToAPIVersionAndKind()
	}
	md := top.Metadata
	content, m, err := withoutManagedFields(raw, md.ManagedFields)
	if err != nil {
		return nil, err
	}
	if m != nil {
		return f.FromList(&unstructured.Unstructured{Object: m})
	}
	o := &Object{
		kind:            unique.Make(schema.FromAPIVersionAndKind(top.APIVersion, top.Kind)),
		namespace:       Intern(md.Namespace),
		name:            f.name(md.Name),
		uid:             md.UID,
		resourceVersion: md.ResourceVersion,
		created:         md.CreationTimestamp.unix,
		deleting:        md.DeletionTimestamp.set,
		owner:           Intern(md.Annotations.Policy),
		chain:           md.Annotations.Chain,
		triggerUID:      md.Labels.TriggerUID,
		onDelete:        md.Labels.GeneratedOnDelete != "",
		clone:           md.Labels.SourceUID != nil,
		intact:          originIntact(md.Annotations.Policy, md.Labels.PolicyName, md.Labels.PolicyNamespace),
	}
	if (f.generated || md.Annotations.Policy != "") && len(md.ManagedFields) > 0 {
		var entries []managedEntry
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(md.ManagedFields, &entries); err != nil {
			return nil, err
		}
		if f.generated {
			o.createHeld = slices.ContainsFunc(entries, managedEntry.isCreate)
			o.written = slices.ContainsFunc(entries, managedEntry.isSprouts)
		}
		o.originWritten = originWritten(carriedOrigin(bool(md.Labels.ManagedBy), md.Labels.PolicyName, md.Labels.PolicyNamespace,
			md.Labels.TriggerUID, md.Annotations.Policy, md.Annotations.Chain), writtenBySprout(entries))
	}
	o.proven = f.proof.proves(md.Annotations.Proof, o.origin(md.Annotations.Chain), bool(md.Labels.ManagedBy), o.originWritten)
	f.setContent(o, content)
	return o, nil
}

// listedKind is the kind of a list's items, which the items of a
// built-in type's list do not say: each is given it.
type listedKind struct {
	gvk schema.GroupVersionKind
	// head begins an object of the kind: its brace and its apiVersion and
	// kind members, made once a list rather than once an item.
	head []byte
}

// listedKindOf returns the listedKind of the items of a list of gvk.
func listedKindOf(gvk schema.GroupVersionKind) (*listedKind, error) {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	head, err := json.Marshal(struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}{apiVersion, kind})
	if err != nil {
		return nil, err
	}
	return &listedKind{gvk: gvk, head: head[:len(head)-1]}, nil
}

// withKind returns raw, a JSON object, with the apiVersion and kind
// members of l written first.
func (l *listedKind) withKind(raw []byte) ([]byte, error) {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) < 2 || raw[0] != '{' {
		return nil, fmt.Errorf("a list item is not a JSON object")
	}
	out := make([]byte, 0, len(l.head)+1+len(raw))
	out = append(out, l.head...)
	if rest := bytes.TrimLeft(raw[1:], " \t\r\n"); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, raw[1:]...), nil
}

// fromTyped returns obj, a typed object as a protobuf watch decoded it, as
// a cache of f holds it. A generated object's version that a create made
// as desired is kept released, and its JSON, when the create's answer came
// first, never encoded (half the events of a cold start). A version of
// Sprout's create that comes before the answer (pending) keeps obj, and
// its JSON is encoded only if it is read before the answer releases it.
// Others are made of the JSON the API server's JSON serializer would have
// sent.
func (f Form) fromTyped(obj runtime.Object) (*Object, error) {
	if !f.generated {
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		return f.FromJSON(raw)
	}
	o, err := f.identityOf(obj)
	if err != nil {
		return nil, err
	}
	if stamp, ok := f.created.claim(o); ok {
		o.body.Store(&body{holds: stamp})
		return o, nil
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	if f.created != nil && pending(o) {
		o.body.Store(&body{typed: obj})
	} else {
		content, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		f.setContent(o, content)
	}
	f.created.watch(o)
	return o, nil
}

// pending reports whether o, a generated object's version no create's
// answer has claimed, may be one whose answer is still on its way: a
// version of Sprout's create (its entry still holds the fields, and its
// proof proves it Sprout's, which a forged entry does not), created within
// createdMemory. The versions a watch-list of a restart sends were
// mostly created long before, and a full sync reads each of them: they
// are encoded as they come, on the watch's goroutine rather than the
// sync's.
func pending(o *Object) bool {
	return o.proven && o.createHeld && time.Now().Unix()-o.created <= int64(createdMemory/time.Second)
}

// identityOf returns what a generated object's cache reads of obj, a typed
// object, without its content: the fields syncs read, from its metadata.
func (f Form) identityOf(obj runtime.Object) (*Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	labels, annotations := m.GetLabels(), m.GetAnnotations()
	_, clone := labels[sproutv1alpha1.LabelSourceUID]
	policy := annotations[sproutv1alpha1.AnnotationPolicy]
	o := &Object{
		kind:            unique.Make(obj.GetObjectKind().GroupVersionKind()),
		namespace:       Intern(m.GetNamespace()),
		name:            Intern(m.GetName()),
		uid:             m.GetUID(),
		resourceVersion: m.GetResourceVersion(),
		created:         m.GetCreationTimestamp().Unix(),
		deleting:        m.GetDeletionTimestamp() != nil,
		owner:           Intern(policy),
		triggerUID:      labels[sproutv1alpha1.LabelTriggerUID],
		onDelete:        labels[sproutv1alpha1.LabelGeneratedOnDelete] != "",
		clone:           clone,
		createHeld:      slices.ContainsFunc(m.GetManagedFields(), IsCreateEntry),
		written:         slices.ContainsFunc(m.GetManagedFields(), IsSproutEntry),
		intact:          originIntact(policy, labels[sproutv1alpha1.LabelPolicyName], labels[sproutv1alpha1.LabelPolicyNamespace]),
	}
	proof, origin, managedBy := annotations[AnnotationProof], o.origin(annotations[sproutv1alpha1.AnnotationChain]), labels[sproutv1alpha1.LabelManagedBy] != ""
	// A proof that proves the origin answers every question the managed
	// fields would (OriginWritten): they are not decoded, at every event
	// of every object Sprout signed.
	if o.proven = origin.policy != "" && f.proof.Keyed() && f.proof.proves(proof, origin, managedBy, false); !o.proven {
		o.originWritten = OriginWritten(m.GetManagedFields(), labels, annotations)
		o.proven = f.proof.proves(proof, origin, managedBy, o.originWritten)
	}
	return o, nil
}

// name is how f keeps an object's name: the names of generated objects
// repeat across namespaces, a trigger's most often do not.
func (f Form) name(s string) string {
	if f.generated {
		return Intern(s)
	}
	return s
}

// setContent sets o's content, JSON less the managed fields. A trigger's
// is kept without its identity members, in o itself: it is never
// released.
func (f Form) setContent(o *Object, content []byte) {
	if f.generated {
		o.body.Store(&body{content: content})
		return
	}
	o.inline.content = o.setApart(content)
	o.body.Store(&o.inline)
}

// originIntact reports whether the policy labels of an object name the
// policy its AnnotationPolicy does (Kind/name or Kind/namespace/name). It
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

// metadata is what FromJSON decodes of an object's metadata. The tags are
// LabelGeneratedOnDelete, LabelSourceUID, LabelTriggerUID, LabelPolicyName,
// LabelPolicyNamespace, LabelManagedBy, AnnotationPolicy, AnnotationChain
// and AnnotationProof (TestFromJSONAgreesWithFromList and TestOriginWrittenAgreesEverywhere
// hold them to each other).
type metadata struct {
	Name              string    `json:"name"`
	Namespace         string    `json:"namespace"`
	UID               types.UID `json:"uid"`
	ResourceVersion   string    `json:"resourceVersion"`
	CreationTimestamp timestamp `json:"creationTimestamp"`
	DeletionTimestamp timestamp `json:"deletionTimestamp"`
	Labels            struct {
		GeneratedOnDelete string  `json:"sprout.dev/generated-on-delete"`
		SourceUID         *string `json:"generate.kyverno.io/source-uid"` // present, even empty: a clone
		TriggerUID        string  `json:"generate.kyverno.io/trigger-uid"`
		PolicyName        string  `json:"generate.kyverno.io/policy-name"`
		PolicyNamespace   string  `json:"sprout.dev/policy-namespace"`
		ManagedBy         present `json:"app.kubernetes.io/managed-by"` // only whether it is there
	} `json:"labels"`
	Annotations struct {
		Policy string `json:"sprout.dev/policy"`
		Chain  string `json:"sprout.dev/chain"`
		Proof  string `json:"sprout.dev/proof"`
	} `json:"annotations"`
	ManagedFields json.RawMessage `json:"managedFields"`
}

// timestamp is a timestamp as the API server writes it (RFC 3339), as
// Unix seconds, its precision: read as metav1.Time reads it, without the
// allocations of its decoding, which every event of a watch paid.
type timestamp struct {
	unix int64
	set  bool
}

func (t *timestamp) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("timestamp %s is not a string", b)
	}
	parsed, err := time.Parse(time.RFC3339, string(b[1:len(b)-1]))
	if err != nil {
		return err
	}
	*t = timestamp{unix: parsed.Unix(), set: true}
	return nil
}

// managedEntry is what FromJSON decodes of a managed-fields entry: of its
// fields, only the origin's.
type managedEntry struct {
	Manager     string                            `json:"manager"`
	Operation   metav1.ManagedFieldsOperationType `json:"operation"`
	Subresource string                            `json:"subresource"`
	FieldsV1    fieldsOrigin                      `json:"fieldsV1"`
}

func (e managedEntry) isCreate() bool  { return IsCreateEntry(e.entry()) }
func (e managedEntry) isSprouts() bool { return IsSproutEntry(e.entry()) }

func (e managedEntry) entry() metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: e.Manager, Operation: e.Operation, Subresource: e.Subresource}
}

// listedEntries reads the managed fields of md, metadata as a list decoded
// it into maps, as FromJSON does: the typed entries cost a conversion of
// each.
func listedEntries(md map[string]any) []managedEntry {
	listed, _ := md["managedFields"].([]any)
	entries := make([]managedEntry, 0, len(listed))
	for _, e := range listed {
		m, _ := e.(map[string]any)
		fields, _ := m["fieldsV1"].(map[string]any)
		entries = append(entries, managedEntry{Manager: str(m, "manager"),
			Operation: metav1.ManagedFieldsOperationType(str(m, "operation")), Subresource: str(m, "subresource"),
			FieldsV1: fieldsOriginOf(fields)})
	}
	return entries
}

// IsCreateEntry reports whether e is the Update entry a create by Sprout
// leaves.
func IsCreateEntry(e metav1.ManagedFieldsEntry) bool {
	return e.Manager == sproutv1alpha1.FieldManager && e.Operation == metav1.ManagedFieldsOperationUpdate && e.Subresource == ""
}

// IsSproutEntry reports whether e is an entry Sprout's writes of an object
// leave: its Apply entry, or the Update entry of its create. Either says
// that Sprout wrote the object, unless a client forged it (managed fields
// can be written like any other field).
func IsSproutEntry(e metav1.ManagedFieldsEntry) bool {
	return e.Manager == sproutv1alpha1.FieldManager && e.Subresource == "" &&
		(e.Operation == metav1.ManagedFieldsOperationApply || e.Operation == metav1.ManagedFieldsOperationUpdate)
}

// str returns m[key] when it is a string.
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}
