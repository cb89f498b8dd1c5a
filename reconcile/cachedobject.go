package reconcile

import (
	"encoding/json"
	"slices"
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"

	"github.com/sprout-gitops/sprout/inventory"
)

// cachedObject is how a trigger informer holds an object: what a sync reads
// of every trigger (its identity, version, creation and deletion) apart,
// and the rest as JSON less its managed fields, decoded when a policy
// matches or evaluates the object (once per version: the evaluation memo
// keeps the results), or a program reads it. As maps, Namespaces take
// several times the memory of their JSON, all of it pointers for the
// garbage collector to scan at every cycle; the JSON is never scanned.
//
// Like inventory.Cached, a cachedObject is never modified: an informer
// replaces it when its object changes, so its address stands for the
// version it holds.
type cachedObject struct {
	kind                             unique.Handle[schema.GroupVersionKind]
	namespace, name, resourceVersion string
	uid                              types.UID
	// created is the creationTimestamp in Unix seconds, its precision.
	created  int64
	deleting bool
	// apart are the metadata members content lacks, which are kept above
	// and put back when it is decoded.
	apart   identity
	content []byte
}

// identity marks metadata members a cachedObject keeps apart, not in its
// content: a good part of a small object such as a Namespace.
type identity uint8

const (
	apartUID identity = 1 << iota
	apartResourceVersion
	apartCreated
)

// members returns, for each identity member o keeps, its JSON as the API
// server writes it, and the member's mark.
func (o *cachedObject) members() ([3][]byte, [3]identity) {
	return [3][]byte{
			[]byte(`"uid":"` + string(o.uid) + `"`),
			[]byte(`"resourceVersion":"` + o.resourceVersion + `"`),
			[]byte(`"creationTimestamp":"` + o.createdAt().UTC().Format(time.RFC3339) + `"`),
		},
		[3]identity{apartUID, apartResourceVersion, apartCreated}
}

// setApart returns content less the identity members o keeps, each cut
// out where it is found exactly once as o has it (so that it is
// metadata's), and marks them apart. The result has a copy of its own.
func (o *cachedObject) setApart(content []byte) []byte {
	members, marks := o.members()
	var cuts [][2]int
	for i, m := range members {
		if from, to, ok := inventory.MemberSpan(content, m); ok {
			cuts = append(cuts, [2]int{from, to})
			o.apart |= marks[i]
		}
	}
	if len(cuts) == 0 {
		return content
	}
	slices.SortFunc(cuts, func(a, b [2]int) int { return a[0] - b[0] })
	out := make([]byte, 0, len(content))
	at := 0
	for _, c := range cuts {
		if c[0] > at {
			out = append(out, content[at:c[0]]...)
		}
		at = max(at, c[1])
	}
	return slices.Clip(append(out, content[at:]...))
}

// putBack puts the members kept apart back into m, the decoded content.
func (o *cachedObject) putBack(m map[string]any) {
	if o.apart == 0 {
		return
	}
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		return
	}
	if o.apart&apartUID != 0 {
		md["uid"] = string(o.uid)
	}
	if o.apart&apartResourceVersion != 0 {
		md["resourceVersion"] = o.resourceVersion
	}
	if o.apart&apartCreated != 0 {
		md["creationTimestamp"] = o.createdAt().UTC().Format(time.RFC3339)
	}
}

// newCachedObject returns u as a trigger cache holds it. u itself loses
// its managed fields: it is the informer's to give away.
func newCachedObject(u *unstructured.Unstructured) (*cachedObject, error) {
	o := &cachedObject{
		kind:            unique.Make(u.GroupVersionKind()),
		namespace:       intern(u.GetNamespace()),
		name:            u.GetName(),
		resourceVersion: u.GetResourceVersion(),
		uid:             u.GetUID(),
		created:         u.GetCreationTimestamp().Unix(),
		deleting:        u.GetDeletionTimestamp() != nil,
	}
	u.SetManagedFields(nil)
	content, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	o.content = o.setApart(content)
	return o, nil
}

// cachedObjectFromJSON returns the object raw encodes, as a watch sends it,
// as a trigger cache holds it, without decoding it into maps. raw becomes
// the cachedObject's.
func cachedObjectFromJSON(raw []byte) (*cachedObject, error) {
	var top struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name              string          `json:"name"`
			Namespace         string          `json:"namespace"`
			UID               types.UID       `json:"uid"`
			ResourceVersion   string          `json:"resourceVersion"`
			CreationTimestamp metav1.Time     `json:"creationTimestamp"`
			DeletionTimestamp *metav1.Time    `json:"deletionTimestamp"`
			ManagedFields     json.RawMessage `json:"managedFields"`
		} `json:"metadata"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &top); err != nil {
		return nil, err
	}
	md := top.Metadata
	content, m, err := inventory.WithoutManagedFields(raw, md.ManagedFields)
	if err != nil {
		return nil, err
	}
	if m != nil {
		return newCachedObject(&unstructured.Unstructured{Object: m})
	}
	o := &cachedObject{
		kind:            unique.Make(schema.FromAPIVersionAndKind(top.APIVersion, top.Kind)),
		namespace:       intern(md.Namespace),
		name:            md.Name,
		resourceVersion: md.ResourceVersion,
		uid:             md.UID,
		created:         md.CreationTimestamp.Unix(),
		deleting:        md.DeletionTimestamp != nil,
	}
	o.content = o.setApart(content)
	return o, nil
}

// selectable returns what the admission matcher reads of the object: its
// identity and, withLabels, its labels, decoded alone. Content that does
// not decode gives the identity alone, as object does.
func (o *cachedObject) selectable(withLabels bool) *metav1.PartialObjectMetadata {
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
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(o.content, &top); err == nil {
			p.Labels = top.Metadata.Labels
		}
	}
	return p
}

// object decodes the object, less its managed fields; the result is the
// caller's. Content that does not decode (it was encoded from maps, so
// never) gives the object's identity alone.
func (o *cachedObject) object() *unstructured.Unstructured {
	var m map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(o.content, &m); err != nil || m == nil {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(o.kind.Value())
		u.SetNamespace(o.namespace)
		u.SetName(o.name)
		u.SetUID(o.uid)
		u.SetResourceVersion(o.resourceVersion)
		return u
	}
	o.putBack(m)
	return &unstructured.Unstructured{Object: m}
}

func (o *cachedObject) GroupVersionKind() schema.GroupVersionKind { return o.kind.Value() }
func (o *cachedObject) GetKind() string                           { return o.kind.Value().Kind }
func (o *cachedObject) GetAPIVersion() string                     { return o.kind.Value().GroupVersion().String() }

// createdAt is the object's creationTimestamp.
func (o *cachedObject) createdAt() time.Time       { return time.Unix(o.created, 0) }
func (o *cachedObject) GetNamespace() string       { return o.namespace }
func (o *cachedObject) GetName() string            { return o.name }
func (o *cachedObject) GetUID() types.UID          { return o.uid }
func (o *cachedObject) GetResourceVersion() string { return o.resourceVersion }

// GetObjectMeta serves the informer's key functions (meta.Accessor).
func (o *cachedObject) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: o.namespace, Name: o.name, UID: o.uid, ResourceVersion: o.resourceVersion}
}

// GetObjectKind serves runtime.Object: a watch event carries a cachedObject.
func (o *cachedObject) GetObjectKind() schema.ObjectKind { return fixedKind{o.kind.Value()} }

// DeepCopyObject returns o: a cachedObject is never modified, so it is its
// own copy.
func (o *cachedObject) DeepCopyObject() runtime.Object { return o }

// fixedKind is the kind of a cachedObject, which does not change.
type fixedKind struct{ gvk schema.GroupVersionKind }

func (k fixedKind) SetGroupVersionKind(schema.GroupVersionKind) {}
func (k fixedKind) GroupVersionKind() schema.GroupVersionKind   { return k.gvk }

// intern returns the one copy of s that every cached object shares:
// Namespaces repeat across thousands of objects.
func intern(s string) string { return unique.Make(s).Value() }
