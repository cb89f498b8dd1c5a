package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
)

// RecordName is the name of a policy's PolicyInventory: gpol.<name> for a
// GeneratingPolicy, ngpol.<namespace>.<name> for a namespaced one. A name too
// long for an object name ends in a hash of the full one instead.
func RecordName(ref sproutv1alpha1.PolicyReference) string {
	name := "gpol." + ref.Name
	if ref.Namespace != "" {
		name = "ngpol." + ref.Namespace + "." + ref.Name
	}
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:validation.DNS1123SubdomainMaxLength-17] + "." + hex.EncodeToString(sum[:])[:16]
}

// DefaultShardSize is how many admitted and generated entries one record
// holds (about 700 KiB at their usual length, half the object size limit).
// Beyond that they are spread over shard records.
const DefaultShardSize = 8000

// Records reads (from a cache) and writes PolicyInventory objects, splitting
// a record whose lists grow too large over shard records named
// <record>.<n>-<i>, so a policy with 100,000 triggers fits.
type Records struct {
	client    dynamic.ResourceInterface
	store     cache.Store
	shardSize int

	// decoded keeps, per record name, the last cached object decoded and
	// what it decoded to: a sync saves its record twice, most often
	// unchanged, and the converter's reflection showed in Sprout's CPU
	// profile while triggers arrived.
	mu      sync.Mutex
	decoded map[string]decodedRecord
	// written keeps, per record name, what its last write returned, while
	// the cache holds an older version: compared with the cache alone, a
	// record changed and changed back before the cache saw the change
	// would not be written back.
	written map[string]*unstructured.Unstructured
}

// decodedRecord is a cached record and its decoding.
type decodedRecord struct {
	from *unstructured.Unstructured
	rec  *sproutv1alpha1.PolicyInventory
}

// NewRecords returns Records that write through client and read from store,
// a cache of every PolicyInventory. shardSize 0 means DefaultShardSize.
func NewRecords(client dynamic.Interface, store cache.Store, shardSize int) *Records {
	if shardSize <= 0 {
		shardSize = DefaultShardSize
	}
	return &Records{client: client.Resource(sproutv1alpha1.PolicyInventories), store: store, shardSize: shardSize,
		decoded: map[string]decodedRecord{}, written: map[string]*unstructured.Unstructured{}}
}

// FromUnstructured decodes a cached PolicyInventory.
func FromUnstructured(u *unstructured.Unstructured) (*sproutv1alpha1.PolicyInventory, error) {
	rec := &sproutv1alpha1.PolicyInventory{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rec); err != nil {
		return nil, fmt.Errorf("PolicyInventory %s: %w", u.GetName(), err)
	}
	return rec, nil
}

// cached returns the record of that name as the cache holds it, or as
// Records last wrote it when the cache has not seen that write yet; nil
// when the cache holds none.
func (r *Records) cached(name string) (*sproutv1alpha1.PolicyInventory, error) {
	obj, ok, err := r.store.GetByKey(name)
	if err != nil || !ok {
		return nil, err
	}
	u := obj.(*unstructured.Unstructured)
	r.mu.Lock()
	if w := r.written[name]; w != nil {
		if cluster.Older(u.GetResourceVersion(), w.GetResourceVersion()) {
			u = w
		} else {
			delete(r.written, name)
		}
	}
	d, ok := r.decoded[name]
	r.mu.Unlock()
	if ok && d.from == u {
		return d.rec.DeepCopy(), nil // an informer replaces what changes: the same object, the same record
	}
	rec, err := FromUnstructured(u)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.decoded[name] = decodedRecord{from: u, rec: rec.DeepCopy()}
	r.mu.Unlock()
	return rec, nil
}

// Generations names the versions of the specs of a policy's record and its
// shards that the cache holds: their UIDs and generations, which a status
// write leaves as they are. "" when no record is cached.
func (r *Records) Generations(ref sproutv1alpha1.PolicyReference) string {
	name := RecordName(ref)
	obj, ok, err := r.store.GetByKey(name)
	if err != nil || !ok {
		return ""
	}
	u := obj.(*unstructured.Unstructured)
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d", u.GetUID(), u.GetGeneration())
	shards, _, _ := unstructured.NestedInt64(u.Object, "spec", "shards")
	for i := range int(shards) {
		obj, ok, err := r.store.GetByKey(shardName(name, int(shards), i))
		if err != nil || !ok {
			return ""
		}
		s := obj.(*unstructured.Unstructured)
		fmt.Fprintf(&b, ",%s/%d", s.GetUID(), s.GetGeneration())
	}
	return b.String()
}

// Get returns a policy's record with its shards merged back in, or nil.
func (r *Records) Get(ref sproutv1alpha1.PolicyReference) (*sproutv1alpha1.PolicyInventory, error) {
	main, err := r.cached(RecordName(ref))
	if err != nil || main == nil {
		return nil, err
	}
	return r.merge(main)
}

// List returns every main record, shards merged.
func (r *Records) List() ([]*sproutv1alpha1.PolicyInventory, error) {
	var out []*sproutv1alpha1.PolicyInventory
	for _, obj := range r.store.List() {
		rec, err := FromUnstructured(obj.(*unstructured.Unstructured))
		if err != nil {
			return nil, err
		}
		if rec.Spec.ShardOf != "" {
			continue
		}
		if rec, err = r.merge(rec); err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

func (r *Records) merge(main *sproutv1alpha1.PolicyInventory) (*sproutv1alpha1.PolicyInventory, error) {
	out := main.DeepCopy()
	for i := range main.Spec.Shards {
		shard, err := r.cached(shardName(main.Name, main.Spec.Shards, i))
		if err != nil {
			return nil, err
		}
		if shard == nil {
			return nil, fmt.Errorf("PolicyInventory %s: shard %d of %d is missing", main.Name, i, main.Spec.Shards)
		}
		out.Spec.Admitted = append(out.Spec.Admitted, shard.Spec.Admitted...)
		out.Spec.Generated = append(out.Spec.Generated, shard.Spec.Generated...)
	}
	out.Spec.Shards = 0
	return out, nil
}

// shardName names shard i of a set of n. The set size is in the name, so a
// reshard writes a new set before the main record points to it, and a crash
// in between leaves the main record pointing to a whole set.
func shardName(main string, n, i int) string { return fmt.Sprintf("%s.%d-%d", main, n, i) }

// split spreads a record's lists over shards when they are too long for one
// object: each entry goes to the shard its hash names, so adding one entry
// rewrites one shard, not all.
func (r *Records) split(rec *sproutv1alpha1.PolicyInventory) (*sproutv1alpha1.PolicyInventory, []*sproutv1alpha1.PolicyInventory) {
	total := len(rec.Spec.Admitted) + len(rec.Spec.Generated)
	if total <= r.shardSize {
		return rec, nil
	}
	n := total/r.shardSize + 2 // slack: hashing spreads unevenly
	shards := make([]*sproutv1alpha1.PolicyInventory, n)
	for i := range shards {
		shards[i] = &sproutv1alpha1.PolicyInventory{}
		shards[i].Name = shardName(rec.Name, n, i)
		shards[i].Labels = rec.Labels
		shards[i].Spec = sproutv1alpha1.PolicyInventorySpec{Policy: rec.Spec.Policy, ShardOf: rec.Name}
	}
	for _, e := range rec.Spec.Admitted {
		s := shards[shardOf(e, n)]
		s.Spec.Admitted = append(s.Spec.Admitted, e)
	}
	for _, e := range rec.Spec.Generated {
		s := shards[shardOf(e, n)]
		s.Spec.Generated = append(s.Spec.Generated, e)
	}
	main := rec.DeepCopy()
	main.Spec.Admitted, main.Spec.Generated, main.Spec.Shards = nil, nil, n
	return main, shards
}

func shardOf(entry string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(entry))
	return int(h.Sum32() % uint32(n))
}

// Save writes a policy's record (its spec: UpdateStatus writes the status),
// with all its entries, as a main record and as many shards as it needs,
// each only if it differs from the cached copy:
// an unchanged record costs no request. Shards no longer needed go.
func (r *Records) Save(ctx context.Context, rec *sproutv1alpha1.PolicyInventory) error {
	rec.SetName(RecordName(rec.Spec.Policy))
	normalize(rec)
	main, shards := r.split(rec)
	current, err := r.cached(main.Name)
	if err != nil {
		return err
	}
	for _, shard := range shards {
		normalize(shard)
		cur, err := r.cached(shard.Name)
		if err != nil {
			return err
		}
		if err := r.saveOne(ctx, shard, cur); err != nil {
			return err
		}
	}
	if err := r.saveOne(ctx, main, current); err != nil {
		return err
	}
	if current != nil && current.Spec.Shards != len(shards) {
		// The old set, now that the main record no longer points to it.
		for i := range current.Spec.Shards {
			if err := r.deleteOne(ctx, shardName(main.Name, current.Spec.Shards, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// normalize sorts lists and makes empty ones absent, so neither order nor
// emptiness counts as a change.
func normalize(rec *sproutv1alpha1.PolicyInventory) {
	slices.Sort(rec.Spec.Admitted)
	slices.Sort(rec.Spec.Generated)
	slices.Sort(rec.Spec.Predating)
	slices.SortFunc(rec.Spec.Resources, func(a, b sproutv1alpha1.Resource) int {
		return strings.Compare(a.Group+"/"+a.Version+"/"+a.Resource, b.Group+"/"+b.Version+"/"+b.Resource)
	})
	if len(rec.Spec.Admitted) == 0 {
		rec.Spec.Admitted = nil
	}
	if len(rec.Spec.Generated) == 0 {
		rec.Spec.Generated = nil
	}
	if len(rec.Spec.Resources) == 0 {
		rec.Spec.Resources = nil
	}
	if len(rec.Spec.Predating) == 0 {
		rec.Spec.Predating = nil
	}
}

// saveOne writes a record's spec if it changed.
func (r *Records) saveOne(ctx context.Context, rec, current *sproutv1alpha1.PolicyInventory) error {
	if current == nil || !equality.Semantic.DeepEqual(rec.Spec, current.Spec) || !sameLabels(rec.Labels, current.Labels) {
		return r.apply(ctx, rec, false)
	}
	return nil
}

// UpdateStatus writes the status of a policy's record, which Save has
// written: update changes a copy of the cached status (empty when none is
// cached), and it is written only if it then differs.
func (r *Records) UpdateStatus(ctx context.Context, ref sproutv1alpha1.PolicyReference, update func(*sproutv1alpha1.PolicyInventoryStatus)) error {
	rec := &sproutv1alpha1.PolicyInventory{}
	rec.SetName(RecordName(ref))
	rec.Labels = map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy}
	current, err := r.cached(rec.Name)
	if err != nil {
		return err
	}
	if current != nil {
		rec.Status = *current.Status.DeepCopy() // update must not change what it is compared with
	}
	update(&rec.Status)
	if current != nil && sameStatus(rec.Status, current.Status) {
		return nil
	}
	return r.apply(ctx, rec, true)
}

// Delete removes a policy's record and its shards; one already gone is fine.
func (r *Records) Delete(ctx context.Context, ref sproutv1alpha1.PolicyReference) error {
	name := RecordName(ref)
	current, err := r.cached(name)
	if err != nil {
		return err
	}
	if current != nil {
		for i := range current.Spec.Shards {
			if err := r.deleteOne(ctx, shardName(name, current.Spec.Shards, i)); err != nil {
				return err
			}
		}
	}
	return r.deleteOne(ctx, name)
}

func (r *Records) deleteOne(ctx context.Context, name string) error {
	r.mu.Lock()
	delete(r.written, name)
	r.mu.Unlock()
	err := r.client.Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("PolicyInventory %s: delete: %w", name, err)
	}
	return nil
}

// sameStatus compares statuses, ignoring when conditions last changed.
func sameStatus(a, b sproutv1alpha1.PolicyInventoryStatus) bool {
	if a.Triggers != b.Triggers || a.Objects != b.Objects || a.LastHandledReconcileAt != b.LastHandledReconcileAt || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}

func sameLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// apply writes the record's spec, or its status, with server-side apply.
func (r *Records) apply(ctx context.Context, rec *sproutv1alpha1.PolicyInventory, status bool) error {
	obj := map[string]any{
		"apiVersion": sproutv1alpha1.GroupVersion.String(),
		"kind":       sproutv1alpha1.PolicyInventoryKind,
		"metadata":   map[string]any{"name": rec.Name, "labels": toAny(rec.Labels)},
	}
	part, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rec)
	if err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: sproutv1alpha1.FieldManager, Force: true}
	var out *unstructured.Unstructured
	if status {
		obj["status"] = part["status"]
		out, err = r.client.ApplyStatus(ctx, rec.Name, &unstructured.Unstructured{Object: obj}, opts)
	} else {
		obj["spec"] = part["spec"]
		out, err = r.client.Apply(ctx, rec.Name, &unstructured.Unstructured{Object: obj}, opts)
	}
	if err != nil {
		return fmt.Errorf("PolicyInventory %s: save: %w", rec.Name, err)
	}
	r.mu.Lock()
	r.written[rec.Name] = out
	r.mu.Unlock()
	return nil
}
