package cluster

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// Labels are anyone's to write who may patch an object: the labels and
// annotation that name a policy's object as its own (its origin), copied
// onto any other object, made that object look like the policy's, to be
// pruned with the policy's rights (a delete by proxy) or written over.
// Managed fields say who wrote each field. Sprout writes an object's
// origin with its own field manager whoever it writes as (impersonating
// an account changes the rights, not the manager): a create leaves the
// origin under the create's Update entry, an apply under the Apply entry.
// A client that copies the labels leaves them under its own entry. So an
// object's origin counts only where Sprout's entries hold every origin
// field the object carries (OriginWritten).
//
// A client may still name itself sprout (a field manager is a request
// parameter) or write managedFields outright: the managed fields are
// evidence against a copy, not a signature. They suffice to write over an
// object; to prune or claim one takes its proof (proof.go).

// originFields is a set of the fields that name an object's origin.
type originFields uint8

const (
	originManagedBy originFields = 1 << iota
	originPolicyName
	originPolicyNamespace
	originTriggerUID
	originPolicy // the AnnotationPolicy annotation
	originChain  // the AnnotationChain annotation
)

// carriedOrigin returns the origin fields an object carries, from their
// values: a field it does not carry needs no writer.
func carriedOrigin(managedBy bool, policyName, policyNamespace, triggerUID, policy, chain string) originFields {
	var f originFields
	if managedBy {
		f |= originManagedBy
	}
	for _, c := range [...]struct {
		value string
		field originFields
	}{{policyName, originPolicyName}, {policyNamespace, originPolicyNamespace},
		{triggerUID, originTriggerUID}, {policy, originPolicy}, {chain, originChain}} {
		if c.value != "" {
			f |= c.field
		}
	}
	return f
}

// originWritten reports whether the origin fields carried are all among
// those Sprout's managed-fields entries hold (written), the managed-by
// label among them: without it, nothing names the object Sprout's.
func originWritten(carried, written originFields) bool {
	return carried&originManagedBy != 0 && carried&^written == 0
}

// fieldsOrigin is what a managed-fields entry's fieldsV1 holds of the
// origin fields, decoded without maps: the rest of it is passed over. The
// tags are LabelManagedBy, LabelPolicyName, LabelPolicyNamespace,
// LabelTriggerUID, AnnotationPolicy and AnnotationChain, prefixed "f:" as fieldsV1 names
// members (TestOriginWrittenAgreesEverywhere holds them to each other).
type fieldsOrigin struct {
	Metadata struct {
		Labels struct {
			ManagedBy       present `json:"f:app.kubernetes.io/managed-by"`
			PolicyName      present `json:"f:generate.kyverno.io/policy-name"`
			PolicyNamespace present `json:"f:sprout.dev/policy-namespace"`
			TriggerUID      present `json:"f:generate.kyverno.io/trigger-uid"`
		} `json:"f:labels"`
		Annotations struct {
			Policy present `json:"f:sprout.dev/policy"`
			Chain  present `json:"f:sprout.dev/chain"`
		} `json:"f:annotations"`
	} `json:"f:metadata"`
}

// fields returns the origin fields f holds.
func (f *fieldsOrigin) fields() originFields {
	l, a := &f.Metadata.Labels, &f.Metadata.Annotations
	var out originFields
	for _, c := range [...]struct {
		held  present
		field originFields
	}{{l.ManagedBy, originManagedBy}, {l.PolicyName, originPolicyName}, {l.PolicyNamespace, originPolicyNamespace},
		{l.TriggerUID, originTriggerUID}, {a.Policy, originPolicy}, {a.Chain, originChain}} {
		if c.held {
			out |= c.field
		}
	}
	return out
}

// present is a member that is there, not null nor an empty string: a
// member of fieldsV1, or a label whose value alone need not be kept.
type present bool

func (p *present) UnmarshalJSON(b []byte) error {
	*p = string(b) != "null" && string(b) != `""`
	return nil
}

// fieldsOriginOf reads fields, an entry's fieldsV1 as a list decoded it
// into maps, as FromJSON reads its JSON.
func fieldsOriginOf(fields map[string]any) fieldsOrigin {
	var f fieldsOrigin
	md, _ := fields["f:metadata"].(map[string]any)
	labels, _ := md["f:labels"].(map[string]any)
	annotations, _ := md["f:annotations"].(map[string]any)
	has := func(m map[string]any, key string) present {
		_, ok := m["f:"+key]
		return present(ok)
	}
	f.Metadata.Labels.ManagedBy = has(labels, sproutv1alpha1.LabelManagedBy)
	f.Metadata.Labels.PolicyName = has(labels, sproutv1alpha1.LabelPolicyName)
	f.Metadata.Labels.PolicyNamespace = has(labels, sproutv1alpha1.LabelPolicyNamespace)
	f.Metadata.Labels.TriggerUID = has(labels, sproutv1alpha1.LabelTriggerUID)
	f.Metadata.Annotations.Policy = has(annotations, sproutv1alpha1.AnnotationPolicy)
	f.Metadata.Annotations.Chain = has(annotations, sproutv1alpha1.AnnotationChain)
	return f
}

// writtenBySprout returns the origin fields Sprout's entries among entries
// hold.
func writtenBySprout(entries []managedEntry) originFields {
	var out originFields
	for i := range entries {
		if entries[i].isSprouts() {
			out |= entries[i].FieldsV1.fields()
		}
	}
	return out
}

// OriginWritten reports whether Sprout wrote the origin of an object with
// labels and annotations: entries, its managed fields, give every label
// and annotation that names its origin, the managed-by label among them,
// to an entry of Sprout's (IsSproutEntry). An entry whose fields do not
// decode holds none of them.
func OriginWritten(entries []metav1.ManagedFieldsEntry, labels, annotations map[string]string) bool {
	carried := carriedOrigin(labels[sproutv1alpha1.LabelManagedBy] != "", labels[sproutv1alpha1.LabelPolicyName],
		labels[sproutv1alpha1.LabelPolicyNamespace], labels[sproutv1alpha1.LabelTriggerUID], annotations[sproutv1alpha1.AnnotationPolicy],
		annotations[sproutv1alpha1.AnnotationChain])
	var written originFields
	for _, e := range entries {
		if !IsSproutEntry(e) || e.FieldsV1 == nil {
			continue
		}
		var f fieldsOrigin
		if sigsjson.UnmarshalCaseSensitivePreserveInts(e.FieldsV1.GetRawBytes(), &f) == nil {
			written |= f.fields()
		}
	}
	return originWritten(carried, written)
}
