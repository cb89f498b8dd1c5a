package inventory

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
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
	l := map[string]string{
		sproutv1alpha1.LabelManagedBy:        sproutv1alpha1.ManagedBy,
		sproutv1alpha1.LabelPolicyName:       sproutv1alpha1.LabelValue(o.PolicyName),
		sproutv1alpha1.LabelTriggerName:      sproutv1alpha1.LabelValue(o.Trigger.Name),
		sproutv1alpha1.LabelTriggerNamespace: sproutv1alpha1.LabelValue(o.Trigger.Namespace),
		sproutv1alpha1.LabelTriggerUID:       string(o.Trigger.UID),
		sproutv1alpha1.LabelTriggerKind:      o.Trigger.GVK.Kind,
		sproutv1alpha1.LabelTriggerGroup:     sproutv1alpha1.LabelValue(o.Trigger.GVK.Group),
		sproutv1alpha1.LabelTriggerVersion:   o.Trigger.GVK.Version,
	}
	if o.PolicyNamespace != "" {
		l[sproutv1alpha1.LabelPolicyNamespace] = o.PolicyNamespace
	}
	if s := o.Source; s != nil {
		l[sproutv1alpha1.LabelSourceUID] = string(s.UID)
		l[sproutv1alpha1.LabelSourceName] = sproutv1alpha1.LabelValue(s.Name)
		l[sproutv1alpha1.LabelSourceNamespace] = sproutv1alpha1.LabelValue(s.Namespace)
		l[sproutv1alpha1.LabelSourceKind] = s.GVK.Kind
		l[sproutv1alpha1.LabelSourceGroup] = sproutv1alpha1.LabelValue(s.GVK.Group)
		l[sproutv1alpha1.LabelSourceVersion] = s.GVK.Version
	}
	return l
}

// Label adds the origin's labels, and the exact policy annotation, to obj,
// keeping its other labels and annotations.
func Label(obj *unstructured.Unstructured, o Origin) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range o.Labels() {
		labels[k] = v
	}
	obj.SetLabels(labels)
	if o.Policy != "" {
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[sproutv1alpha1.AnnotationPolicy] = o.Policy
		obj.SetAnnotations(annotations)
	}
}

// MarkGeneratedOnDelete labels an object generated from a trigger's DELETE.
func MarkGeneratedOnDelete(obj *unstructured.Unstructured) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[sproutv1alpha1.LabelGeneratedOnDelete] = "true"
	obj.SetLabels(labels)
}

// MarkChain annotates an object with chain, the policies whose generated
// objects led to its trigger (AnnotationChain).
func MarkChain(obj *unstructured.Unstructured, chain string) {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[sproutv1alpha1.AnnotationChain] = chain
	obj.SetAnnotations(annotations)
}
