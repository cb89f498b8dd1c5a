package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
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

// Records reads and writes PolicyInventory objects.
type Records struct {
	client dynamic.ResourceInterface
}

// NewRecords returns Records writing through client.
func NewRecords(client dynamic.Interface) *Records {
	return &Records{client: client.Resource(sproutv1alpha1.PolicyInventories)}
}

// FromUnstructured decodes a cached PolicyInventory.
func FromUnstructured(u *unstructured.Unstructured) (*sproutv1alpha1.PolicyInventory, error) {
	rec := &sproutv1alpha1.PolicyInventory{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rec); err != nil {
		return nil, fmt.Errorf("PolicyInventory %s: %w", u.GetName(), err)
	}
	return rec, nil
}

// Save writes rec when it differs from current (nil: there is none yet),
// spec and status each only if changed, so an unchanged record costs nothing.
// Lists are sorted first, so their order never counts as a change.
func (r *Records) Save(ctx context.Context, rec, current *sproutv1alpha1.PolicyInventory) error {
	rec.SetName(RecordName(rec.Spec.Policy))
	// Empty and absent lists are the same record.
	if len(rec.Spec.Admitted) == 0 {
		rec.Spec.Admitted = nil
	}
	if len(rec.Spec.Generated) == 0 {
		rec.Spec.Generated = nil
	}
	if len(rec.Spec.Resources) == 0 {
		rec.Spec.Resources = nil
	}
	slices.Sort(rec.Spec.Admitted)
	slices.Sort(rec.Spec.Generated)
	slices.SortFunc(rec.Spec.Resources, func(a, b sproutv1alpha1.Resource) int {
		return compareStrings(a.Group+"/"+a.Version+"/"+a.Resource, b.Group+"/"+b.Version+"/"+b.Resource)
	})
	if current == nil || !equality.Semantic.DeepEqual(rec.Spec, current.Spec) || !sameLabels(rec.Labels, current.Labels) {
		if err := r.apply(ctx, rec, false); err != nil {
			return err
		}
	}
	if current == nil || !sameStatus(rec.Status, current.Status) {
		return r.apply(ctx, rec, true)
	}
	return nil
}

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
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if status {
		obj["status"] = part["status"]
		_, err = r.client.ApplyStatus(ctx, rec.Name, &unstructured.Unstructured{Object: obj}, opts)
	} else {
		obj["spec"] = part["spec"]
		_, err = r.client.Apply(ctx, rec.Name, &unstructured.Unstructured{Object: obj}, opts)
	}
	if err != nil {
		return fmt.Errorf("PolicyInventory %s: save: %w", rec.Name, err)
	}
	return nil
}

// Delete removes a policy's record; one already gone is fine.
func (r *Records) Delete(ctx context.Context, ref sproutv1alpha1.PolicyReference) error {
	err := r.client.Delete(ctx, RecordName(ref), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("PolicyInventory %s: delete: %w", RecordName(ref), err)
	}
	return nil
}

// sameStatus compares statuses, ignoring when conditions last changed.
func sameStatus(a, b sproutv1alpha1.PolicyInventoryStatus) bool {
	if a.Triggers != b.Triggers || a.Objects != b.Objects || len(a.Conditions) != len(b.Conditions) {
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

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
