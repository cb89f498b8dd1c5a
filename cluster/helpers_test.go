package cluster

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// stamp stands for a desired state's AnnotationApplied, of its length.
const stamp = "0123456789abcdef01234567"

// appliedConfigMap is a ConfigMap as Sprout's apply leaves it.
func appliedConfigMap() *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": "zk", "namespace": "team-red", "uid": "u1", "resourceVersion": "7",
			"labels":      map[string]any{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelTriggerNamespace: ""},
			"annotations": map[string]any{sproutv1alpha1.AnnotationPolicy: "GeneratingPolicy/zk", sproutv1alpha1.AnnotationApplied: stamp},
		},
		"data": map[string]any{"KAFKA": "k:9092", "ZK": "z:2181"},
		"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}},
	}}
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{
		managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationApply, `{"f:data":{"f:KAFKA":{},"f:ZK":{}},`+
			`"f:metadata":{"f:annotations":{"f:sprout.dev/applied":{},"f:sprout.dev/policy":{}},`+
			`"f:labels":{"f:app.kubernetes.io/managed-by":{},"f:generate.kyverno.io/trigger-namespace":{}}},`+
			`"f:spec":{"f:ports":{"k:{\"port\":80}":{".":{},"f:port":{}}}}}`),
	})
	return obj
}

// generatedConfigMap is a ConfigMap a policy generated for a Namespace,
// labelled as Sprout labels it.
func generatedConfigMap() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "zk-00000", "namespace": "team-00000",
			"labels": map[string]any{
				sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelPolicyName: "zk",
				sproutv1alpha1.LabelTriggerName: "team-00000", sproutv1alpha1.LabelTriggerNamespace: "",
				sproutv1alpha1.LabelTriggerUID: "uid-0", sproutv1alpha1.LabelTriggerKind: "Namespace",
				sproutv1alpha1.LabelTriggerGroup: "", sproutv1alpha1.LabelTriggerVersion: "v1",
			},
			"annotations": map[string]any{sproutv1alpha1.AnnotationPolicy: "GeneratingPolicy/zk", sproutv1alpha1.AnnotationApplied: stamp},
		},
		"data": map[string]any{"KAFKA_ADDRESS": "192.168.10.13:9092", "ZK_ADDRESS": "192.168.10.10:2181"},
	}}
}

// originFieldsV1 is the fieldsV1 of an entry that holds every label and
// annotation naming an object's origin.
const originFieldsV1 = `{"f:metadata":{"f:annotations":{".":{},"f:sprout.dev/policy":{}},"f:labels":{".":{},` +
	`"f:app.kubernetes.io/managed-by":{},"f:generate.kyverno.io/policy-name":{},"f:generate.kyverno.io/trigger-uid":{},` +
	`"f:sprout.dev/policy-namespace":{}}}}`

func managedBy(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	f := &metav1.FieldsV1{}
	f.SetRawBytes([]byte(fields))
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: f}
}
