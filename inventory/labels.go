package inventory

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
)

// Origin is what a downstream object was generated from: a policy, one
// trigger object and, for a clone, the object it copies.
type Origin struct {
	// Policy names the policy as Kind/name or Kind/namespace/name.
	Policy          string
	PolicyName      string
	PolicyNamespace string // empty for a cluster-scoped GeneratingPolicy
	Trigger         ObjectRef
	Source          *ObjectRef // nil unless the object is a clone
}

// ObjectRef identifies a trigger or clone source.
type ObjectRef struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
	UID       types.UID
}

// Labels returns the labels that mark an object as generated from o.
func (o Origin) Labels() map[string]string {
	l := map[string]string{}
	o.eachLabel(func(k, v string) { l[k] = v })
	return l
}

// eachLabel calls set with each label that marks an object as generated
// from o.
func (o Origin) eachLabel(set func(k, v string)) {
	set(sproutv1alpha1.LabelManagedBy, sproutv1alpha1.ManagedBy)
	set(sproutv1alpha1.LabelPolicyName, sproutv1alpha1.LabelValue(o.PolicyName))
	set(sproutv1alpha1.LabelTriggerName, sproutv1alpha1.LabelValue(o.Trigger.Name))
	set(sproutv1alpha1.LabelTriggerNamespace, sproutv1alpha1.LabelValue(o.Trigger.Namespace))
	set(sproutv1alpha1.LabelTriggerUID, string(o.Trigger.UID))
	set(sproutv1alpha1.LabelTriggerKind, o.Trigger.GVK.Kind)
	set(sproutv1alpha1.LabelTriggerGroup, sproutv1alpha1.LabelValue(o.Trigger.GVK.Group))
	set(sproutv1alpha1.LabelTriggerVersion, o.Trigger.GVK.Version)
	if o.PolicyNamespace != "" {
		set(sproutv1alpha1.LabelPolicyNamespace, o.PolicyNamespace)
	}
	if s := o.Source; s != nil {
		set(sproutv1alpha1.LabelSourceUID, string(s.UID))
		set(sproutv1alpha1.LabelSourceName, sproutv1alpha1.LabelValue(s.Name))
		set(sproutv1alpha1.LabelSourceNamespace, sproutv1alpha1.LabelValue(s.Namespace))
		set(sproutv1alpha1.LabelSourceKind, s.GVK.Kind)
		set(sproutv1alpha1.LabelSourceGroup, sproutv1alpha1.LabelValue(s.GVK.Group))
		set(sproutv1alpha1.LabelSourceVersion, s.GVK.Version)
	}
}

// Label adds the origin's labels, and the exact policy annotation, to obj,
// keeping its other labels and annotations.
func Label(obj *unstructured.Unstructured, o Origin) {
	labels := cluster.OwnStrings(obj, "labels", 14)
	if labels == nil {
		return // metadata is not a map: nothing can be set on it
	}
	o.eachLabel(func(k, v string) { labels[k] = v })
	if o.Policy != "" {
		cluster.OwnStrings(obj, "annotations", 3)[sproutv1alpha1.AnnotationPolicy] = o.Policy
	}
}

// MarkGeneratedOnDelete labels an object generated from a trigger's DELETE.
func MarkGeneratedOnDelete(obj *unstructured.Unstructured) {
	if labels := cluster.OwnStrings(obj, "labels", 1); labels != nil {
		labels[sproutv1alpha1.LabelGeneratedOnDelete] = "true"
	}
}

// MarkChain annotates an object with chain, the policies whose generated
// objects led to its trigger (AnnotationChain).
func MarkChain(obj *unstructured.Unstructured, chain string) {
	if annotations := cluster.OwnStrings(obj, "annotations", 1); annotations != nil {
		annotations[sproutv1alpha1.AnnotationChain] = chain
	}
}
