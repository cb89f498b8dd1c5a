package inventory

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// An object a synchronizing policy generated may lose its labels while
// Sprout is stopped, where no claim sees it go (ApplyOptions.Claimed). The
// policy still takes it back when Sprout wrote it, which its managed fields
// say, and nothing left on it names another origin (decideOwner).

// adoptable reports whether an existing object, with labels and
// annotations, names no origin but desired obj's: no other policy in its
// policy labels or annotation, no other trigger of the policy that still
// exists. Its managed-by label does not count: it is the label removed.
func adoptable(obj *unstructured.Unstructured, labels, annotations stringMap, alive func(string) bool) bool {
	if p := annotations.get(sproutv1alpha1.AnnotationPolicy); p != "" && p != metadataStrings(obj, "annotations").get(sproutv1alpha1.AnnotationPolicy) {
		return false
	}
	desired := metadataStrings(obj, "labels")
	for _, k := range []string{sproutv1alpha1.LabelPolicyName, sproutv1alpha1.LabelPolicyNamespace} {
		if v := labels.get(k); v != "" && v != desired.get(k) {
			return false
		}
	}
	t := labels.get(sproutv1alpha1.LabelTriggerUID)
	return t == "" || t == desired.get(sproutv1alpha1.LabelTriggerUID) || alive != nil && !alive(t)
}
