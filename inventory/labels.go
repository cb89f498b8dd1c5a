package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels Sprout writes on every downstream object. The generate.kyverno.io
// ones are Kyverno's, so `kubectl get -l generate.kyverno.io/policy-name=…`
// keeps working after a move from Kyverno.
const (
	LabelManagedBy        = "app.kubernetes.io/managed-by"
	LabelPolicyName       = "generate.kyverno.io/policy-name"
	LabelPolicyNamespace  = "sprout.dev/policy-namespace"
	LabelTriggerName      = "generate.kyverno.io/trigger-name"
	LabelTriggerNamespace = "generate.kyverno.io/trigger-namespace"
	LabelTriggerUID       = "generate.kyverno.io/trigger-uid"
	LabelTriggerKind      = "generate.kyverno.io/trigger-kind"
	LabelTriggerGroup     = "generate.kyverno.io/trigger-group"
	LabelTriggerVersion   = "generate.kyverno.io/trigger-version"
	LabelSourceUID        = "generate.kyverno.io/source-uid"
	LabelSourceName       = "generate.kyverno.io/source-name"
	LabelSourceNamespace  = "generate.kyverno.io/source-namespace"
	LabelSourceKind       = "generate.kyverno.io/source-kind"
	LabelSourceGroup      = "generate.kyverno.io/source-group"
	LabelSourceVersion    = "generate.kyverno.io/source-version"
	// LabelGeneratedOnDelete marks objects generated from a deleted
	// trigger: they are never pruned for the trigger's absence.
	LabelGeneratedOnDelete = "sprout.dev/generated-on-delete"

	// ManagedBy is the value of LabelManagedBy on Sprout's objects.
	ManagedBy = "sprout"

	// AnnotationPolicy names the policy exactly (Kind/name or
	// Kind/namespace/name): label values are cut at 63 characters, names
	// are not.
	AnnotationPolicy = "sprout.dev/policy"
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
		LabelManagedBy:        ManagedBy,
		LabelPolicyName:       LabelValue(o.PolicyName),
		LabelTriggerName:      LabelValue(o.Trigger.Name),
		LabelTriggerNamespace: LabelValue(o.Trigger.Namespace),
		LabelTriggerUID:       string(o.Trigger.UID),
		LabelTriggerKind:      o.Trigger.GVK.Kind,
		LabelTriggerGroup:     LabelValue(o.Trigger.GVK.Group),
		LabelTriggerVersion:   o.Trigger.GVK.Version,
	}
	if o.PolicyNamespace != "" {
		l[LabelPolicyNamespace] = o.PolicyNamespace
	}
	if s := o.Source; s != nil {
		l[LabelSourceUID] = string(s.UID)
		l[LabelSourceName] = LabelValue(s.Name)
		l[LabelSourceNamespace] = LabelValue(s.Namespace)
		l[LabelSourceKind] = s.GVK.Kind
		l[LabelSourceGroup] = LabelValue(s.GVK.Group)
		l[LabelSourceVersion] = s.GVK.Version
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
		annotations[AnnotationPolicy] = o.Policy
		obj.SetAnnotations(annotations)
	}
}

// hashLength is how many hex digits of SHA-256 end an encoded label value.
const hashLength = 16

// LabelValue returns s when it is a valid label value. Object names may be 253
// characters but label values only 63, and some kinds (ClusterRoles, such as
// system:aggregate-to-admin) allow characters no label value may hold, so any
// other value becomes a stable, still readable encoding: its first 46
// characters with every character outside [-A-Za-z0-9_.] turned into a dash,
// trimmed to start and end in an alphanumeric, then a dash and the first 16
// hex digits of the SHA-256 of the whole value. Selecting by an encoded value
// means encoding the name the same way (docs/labels.md).
func LabelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	hash := hex.EncodeToString(sum[:])[:hashLength]
	// Bytes, not runes: a multi-byte character becomes one dash per byte,
	// as the byte-wise shell recipe in docs/labels.md writes it.
	prefix := []byte(s[:min(len(s), validation.LabelValueMaxLength-hashLength-1)])
	for i, c := range prefix {
		if !isAlphanumeric(c) && c != '-' && c != '_' && c != '.' {
			prefix[i] = '-'
		}
	}
	// Only alphanumerics and these three are left: a label value starts and
	// ends in an alphanumeric.
	trimmed := strings.Trim(string(prefix), "-_.")
	if trimmed == "" {
		return hash
	}
	return trimmed + "-" + hash
}

func isAlphanumeric(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// MarkGeneratedOnDelete labels an object generated from a trigger's DELETE.
func MarkGeneratedOnDelete(obj *unstructured.Unstructured) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelGeneratedOnDelete] = "true"
	obj.SetLabels(labels)
}
