package inventory

import (
	"bytes"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// Drifted reports whether live, one of Sprout's objects as read from the
// API server with its managed fields, no longer holds what Sprout last
// applied to it, without knowing what the policy wants now.
//
// The fields Sprout's field manager still owns are taken from live and
// digested as Stamp digests a desired object: equal to the
// sproutv1alpha1.AnnotationApplied stamp, they hold what was applied. A field another
// writer changed has left Sprout's managed fields (or holds another value),
// so the digest differs. Others' additions to maps (a label, an annotation)
// do not count; lists are taken whole, so an item added to a list Sprout
// set does. An object without the stamp, or of which Sprout owns nothing
// any more, has drifted.
func Drifted(live *unstructured.Unstructured) (bool, error) {
	stamp, ok := live.GetAnnotations()[sproutv1alpha1.AnnotationApplied]
	if !ok {
		return true, nil
	}
	owned, err := appliedFields(live)
	if err != nil {
		return false, err
	}
	if owned == nil {
		return true, nil
	}
	return appliedDigest(owned) != stamp, nil
}

// appliedFields returns the part of live that Sprout's apply owns, with the
// identity fields every apply request carries and managed fields never
// list, or nil when Sprout owns nothing of it. Without the object's schema
// the fields are read as a deduced type: maps field by field, lists whole.
func appliedFields(live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var set *fieldpath.Set
	for _, e := range live.GetManagedFields() {
		// Sprout's fields: those it applied, and those a create of its
		// own holds until the next apply hands them over.
		if e.Manager != sproutv1alpha1.FieldManager || e.Subresource != "" || e.FieldsV1 == nil ||
			e.Operation != metav1.ManagedFieldsOperationApply && e.Operation != metav1.ManagedFieldsOperationUpdate {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(bytes.NewReader(e.FieldsV1.GetRawBytes())); err != nil {
			return nil, fmt.Errorf("%s: managed fields of %s: %w", ObjectID(live), sproutv1alpha1.FieldManager, err)
		}
		if set == nil {
			set = s
		} else {
			set = set.Union(s)
		}
	}
	if set == nil {
		return nil, nil
	}
	value, err := typed.DeducedParseableType.FromUnstructured(live.Object)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ObjectID(live), err)
	}
	fields, ok := value.ExtractItems(set.Leaves()).AsValue().Unstructured().(map[string]any)
	if !ok {
		fields = map[string]any{}
	}
	out := &unstructured.Unstructured{Object: fields}
	out.SetAPIVersion(live.GetAPIVersion())
	out.SetKind(live.GetKind())
	out.SetName(live.GetName())
	if ns := live.GetNamespace(); ns != "" {
		out.SetNamespace(ns)
	}
	return out, nil
}
