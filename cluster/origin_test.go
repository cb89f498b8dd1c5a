package cluster

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// TestOriginWrittenAgreesEverywhere: an object's origin counts as Sprout's
// only when Sprout's managed-fields entries (its create's Update entry,
// its Apply entry) hold every label and annotation naming it that the
// object carries, managed-by among them. Labels copied on by another
// writer, or a Sprout entry missing one of them, do not. Every way a cache
// makes an Object, and a read's metadata, agree.
func TestOriginWrittenAgreesEverywhere(t *testing.T) {
	const (
		managedByField = `"f:app.kubernetes.io/managed-by":{}`
		policyField    = `"f:generate.kyverno.io/policy-name":{}`
		triggerField   = `"f:generate.kyverno.io/trigger-uid":{}`
		namespaceField = `"f:sprout.dev/policy-namespace":{}`
		annotation     = `"f:annotations":{".":{},"f:sprout.dev/policy":{}}`
	)
	fields := func(annotations string, labels ...string) string {
		s := `{"f:data":{".":{},"f:ZK":{}},"f:metadata":{`
		if annotations != "" {
			s += annotations + ","
		}
		s += `"f:labels":{".":{}`
		for _, l := range labels {
			s += "," + l
		}
		return s + `}}}`
	}
	all := fields(annotation, managedByField, policyField, triggerField, namespaceField)
	sprout := func(op metav1.ManagedFieldsOperationType, f string) metav1.ManagedFieldsEntry {
		return managedBy(sproutv1alpha1.FieldManager, op, f)
	}
	dataOnly := `{"f:data":{".":{},"f:ZK":{}}}`
	withoutNamespace := func(l, _ map[string]any) { delete(l, sproutv1alpha1.LabelPolicyNamespace) }
	const chainAnnotation = `"f:annotations":{".":{},"f:sprout.dev/policy":{},"f:sprout.dev/chain":{}}`
	withChain := func(_, a map[string]any) { a[sproutv1alpha1.AnnotationChain] = "GeneratingPolicy/before" }
	for name, tt := range map[string]struct {
		entries []metav1.ManagedFieldsEntry
		edit    func(labels, annotations map[string]any)
		want    bool
	}{
		"created by Sprout": {[]metav1.ManagedFieldsEntry{sprout(metav1.ManagedFieldsOperationUpdate, all)}, nil, true},
		"applied by Sprout": {[]metav1.ManagedFieldsEntry{sprout(metav1.ManagedFieldsOperationApply, all)}, nil, true},
		"created, then applied in part": {[]metav1.ManagedFieldsEntry{
			sprout(metav1.ManagedFieldsOperationUpdate, fields("", managedByField, policyField)),
			sprout(metav1.ManagedFieldsOperationApply, fields(annotation, triggerField, namespaceField)),
		}, nil, true},
		"edited by kubectl besides": {[]metav1.ManagedFieldsEntry{
			managedBy("kubectl-edit", metav1.ManagedFieldsOperationUpdate, `{"f:data":{"f:extra":{}}}`),
			sprout(metav1.ManagedFieldsOperationApply, all),
		}, nil, true},
		"a cluster policy's, no namespace label": {[]metav1.ManagedFieldsEntry{
			sprout(metav1.ManagedFieldsOperationUpdate, fields(annotation, managedByField, policyField, triggerField)),
		}, withoutNamespace, true},
		"stamped by a tenant": {[]metav1.ManagedFieldsEntry{
			managedBy("tenant", metav1.ManagedFieldsOperationUpdate, all),
		}, nil, false},
		"tenant's object, stamped as another update": {[]metav1.ManagedFieldsEntry{
			managedBy("tenant", metav1.ManagedFieldsOperationUpdate, dataOnly),
			managedBy("kubectl-label", metav1.ManagedFieldsOperationUpdate, all),
		}, nil, false},
		"Sprout's object, its trigger label rewritten by a tenant": {[]metav1.ManagedFieldsEntry{
			sprout(metav1.ManagedFieldsOperationApply, fields(annotation, managedByField, policyField, namespaceField)),
			managedBy("tenant", metav1.ManagedFieldsOperationUpdate, fields("", triggerField)),
		}, nil, false},
		"Sprout's object, annotation copied by a tenant": {[]metav1.ManagedFieldsEntry{
			sprout(metav1.ManagedFieldsOperationApply, fields("", managedByField, policyField, triggerField, namespaceField)),
			managedBy("tenant", metav1.ManagedFieldsOperationUpdate, fields(annotation)),
		}, nil, false},
		"Sprout's entry on a subresource": {[]metav1.ManagedFieldsEntry{
			subresource(sprout(metav1.ManagedFieldsOperationUpdate, all)),
		}, nil, false},
		"Sprout's entry, no managed-by label carried": {[]metav1.ManagedFieldsEntry{
			sprout(metav1.ManagedFieldsOperationApply, fields(annotation, policyField, triggerField, namespaceField)),
		}, func(l, _ map[string]any) { delete(l, sproutv1alpha1.LabelManagedBy) }, false},
		"no managed fields": {nil, nil, false},
		"a chain written by Sprout": {[]metav1.ManagedFieldsEntry{
			sprout(metav1.ManagedFieldsOperationApply, fields(chainAnnotation, managedByField, policyField, triggerField, namespaceField)),
		}, withChain, true},
		"Sprout's object, a chain added by a tenant": {[]metav1.ManagedFieldsEntry{
			sprout(metav1.ManagedFieldsOperationApply, all),
			managedBy("tenant", metav1.ManagedFieldsOperationUpdate, fields(`"f:annotations":{"f:sprout.dev/chain":{}}`)),
		}, withChain, false},
	} {
		t.Run(name, func(t *testing.T) {
			obj := appliedConfigMap()
			labels := map[string]any{
				sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelPolicyName: "zk",
				sproutv1alpha1.LabelTriggerUID: "t1", sproutv1alpha1.LabelPolicyNamespace: "team-red",
			}
			annotations := map[string]any{sproutv1alpha1.AnnotationPolicy: "NamespacedGeneratingPolicy/team-red/zk"}
			if tt.edit != nil {
				tt.edit(labels, annotations)
			}
			_ = unstructured.SetNestedMap(obj.Object, labels, "metadata", "labels")
			_ = unstructured.SetNestedMap(obj.Object, annotations, "metadata", "annotations")
			obj.SetManagedFields(tt.entries)

			typed := &corev1.ConfigMap{}
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
				t.Fatal(err)
			}
			fromProtobuf, err := Generated(nil).identityOf(typed)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(obj.Object)
			if err != nil {
				t.Fatal(err)
			}
			fromJSON, err := Generated(nil).FromJSON(raw)
			if err != nil {
				t.Fatal(err)
			}
			fromMaps, err := Generated(nil).FromList(watched(t, obj))
			if err != nil {
				t.Fatal(err)
			}
			for how, got := range map[string]bool{
				"maps": fromMaps.OriginWritten(), "JSON": fromJSON.OriginWritten(), "typed": fromProtobuf.OriginWritten(),
				"metadata": OriginWritten(typed.ManagedFields, typed.Labels, typed.Annotations),
			} {
				if got != tt.want {
					t.Errorf("from %s: origin written %v, want %v", how, got, tt.want)
				}
			}
		})
	}
}

// TestTriggersKnowTheOriginSproutWrote: a trigger that names a policy
// counts as generated, in every form a trigger cache reads it, only where
// Sprout's field manager wrote that origin: copied labels do not make a
// trigger Sprout's, so they take it out of no policy
// (skipBackgroundRequests). A trigger that names none has no origin.
func TestTriggersKnowTheOriginSproutWrote(t *testing.T) {
	for _, tc := range []struct {
		name    string
		manager string
		want    bool
	}{{"written by Sprout", sproutv1alpha1.FieldManager, true}, {"copied by another", "kubectl", false}} {
		obj := appliedConfigMap()
		obj.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy(tc.manager, metav1.ManagedFieldsOperationApply, originFieldsV1)})
		raw, err := json.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		fromJSON, err := Triggers.FromJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		fromList, err := Triggers.FromList(obj.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		if fromJSON.OriginWritten() != tc.want || fromList.OriginWritten() != tc.want {
			t.Errorf("%s: origin written %v from JSON, %v from a list; want %v", tc.name, fromJSON.OriginWritten(), fromList.OriginWritten(), tc.want)
		}
	}
	plain := appliedConfigMap()
	plain.SetAnnotations(nil)
	plain.SetLabels(nil)
	raw, err := json.Marshal(plain.Object)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := Triggers.FromJSON(raw); err != nil || o.OriginWritten() {
		t.Errorf("a trigger that names no policy: origin written %v, %v", o.OriginWritten(), err)
	}
}

// TestChainCountsWhereSproutWroteIt: a trigger's chain of policies is the
// policies its chain annotation names and then its own, where Sprout wrote
// them; a chain another writer put on it starts none, in every form a
// trigger cache reads it.
func TestChainCountsWhereSproutWroteIt(t *testing.T) {
	const withChain = `{"f:metadata":{"f:annotations":{".":{},"f:sprout.dev/policy":{},"f:sprout.dev/chain":{}},"f:labels":{".":{},` +
		`"f:app.kubernetes.io/managed-by":{}}}}`
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    string
	}{
		{"written by Sprout", []metav1.ManagedFieldsEntry{managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationApply, withChain)},
			"GeneratingPolicy/a,GeneratingPolicy/b,GeneratingPolicy/zk"},
		{"added by another", []metav1.ManagedFieldsEntry{
			managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationApply, originFieldsV1),
			managedBy("kubectl", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:annotations":{"f:sprout.dev/chain":{}}}}`),
		}, ""},
	} {
		obj := appliedConfigMap()
		obj.SetAnnotations(map[string]string{sproutv1alpha1.AnnotationPolicy: "GeneratingPolicy/zk",
			sproutv1alpha1.AnnotationChain: "GeneratingPolicy/a,GeneratingPolicy/b"})
		obj.SetManagedFields(tc.entries)
		raw, err := json.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		fromJSON, err := Triggers.FromJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		fromList, err := Triggers.FromList(obj.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		for how, o := range map[string]*Object{"JSON": fromJSON, "list": fromList} {
			if got := strings.Join(o.Chain(), ","); got != tc.want {
				t.Errorf("%s, from %s: chain %q, want %q", tc.name, how, got, tc.want)
			}
		}
	}
}
