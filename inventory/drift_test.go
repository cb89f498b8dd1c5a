package inventory

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// appliedConfigMap returns a ConfigMap as Sprout applies it (stamped), and
// as the API server returns it: server fields and Sprout's managed fields,
// in the shape a real server writes them.
func appliedConfigMap() *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": "zk", "namespace": "team-red",
			"labels":      map[string]any{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelTriggerNamespace: ""},
			"annotations": map[string]any{sproutv1alpha1.AnnotationPolicy: "GeneratingPolicy/zk"},
		},
		"data": map[string]any{"KAFKA": "k:9092", "ZK": "z:2181"},
		"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}},
	}}
	Stamp(obj)
	obj.SetUID("u1")
	obj.SetResourceVersion("7")
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{
		managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationApply, `{"f:data":{"f:KAFKA":{},"f:ZK":{}},`+
			`"f:metadata":{"f:annotations":{"f:sprout.dev/applied":{},"f:sprout.dev/policy":{}},`+
			`"f:labels":{"f:app.kubernetes.io/managed-by":{},"f:generate.kyverno.io/trigger-namespace":{}}},`+
			`"f:spec":{"f:ports":{"k:{\"port\":80}":{".":{},"f:port":{}}}}}`),
	})
	return obj
}

func managedBy(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", FieldsType: "FieldsV1",
		FieldsV1: fieldsOf([]byte(fields))}
}

func TestDrifted(t *testing.T) {
	// Another writer took data.ZK: it left Sprout's managed fields.
	withoutZK := managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationApply, `{"f:data":{"f:KAFKA":{}},`+
		`"f:metadata":{"f:annotations":{"f:sprout.dev/applied":{},"f:sprout.dev/policy":{}},`+
		`"f:labels":{"f:app.kubernetes.io/managed-by":{},"f:generate.kyverno.io/trigger-namespace":{}}},`+
		`"f:spec":{"f:ports":{"k:{\"port\":80}":{".":{},"f:port":{}}}}}`)
	tests := []struct {
		name   string
		change func(*unstructured.Unstructured)
		want   bool
	}{
		{"as applied", func(*unstructured.Unstructured) {}, false},
		{"a label added by another writer", func(u *unstructured.Unstructured) {
			labels := u.GetLabels()
			labels["team"] = "red"
			u.SetLabels(labels)
			u.SetManagedFields(append(u.GetManagedFields(), managedBy("kubectl-label", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{"f:team":{}}}}`)))
		}, false},
		{"a field Sprout does not set, added", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "x", "data", "EXTRA")
		}, false},
		{"a value another writer changed", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "elsewhere:2181", "data", "ZK")
			u.SetManagedFields([]metav1.ManagedFieldsEntry{withoutZK,
				managedBy("kubectl-edit", metav1.ManagedFieldsOperationUpdate, `{"f:data":{"f:ZK":{}}}`)})
		}, true},
		{"a field another writer removed", func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "data", "ZK")
			u.SetManagedFields([]metav1.ManagedFieldsEntry{withoutZK})
		}, true},
		{"an item added to a list Sprout set", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"port": int64(80)}, map[string]any{"port": int64(81)}}, "spec", "ports")
		}, true},
		{"the stamp removed", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{sproutv1alpha1.AnnotationPolicy: "GeneratingPolicy/zk"})
		}, true},
		{"nothing left to Sprout", func(u *unstructured.Unstructured) {
			u.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy("kubectl-edit", metav1.ManagedFieldsOperationUpdate, `{"f:data":{}}`)})
		}, true},
		{"Sprout's fields still under its create's update entry", func(u *unstructured.Unstructured) {
			mf := u.GetManagedFields()
			mf[0].Operation = metav1.ManagedFieldsOperationUpdate
			u.SetManagedFields(mf)
		}, false},
		{"a value changed, Sprout's fields under its create's entry", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "elsewhere:2181", "data", "ZK")
			created := withoutZK
			created.Operation = metav1.ManagedFieldsOperationUpdate
			u.SetManagedFields([]metav1.ManagedFieldsEntry{created,
				managedBy("kubectl-edit", metav1.ManagedFieldsOperationUpdate, `{"f:data":{"f:ZK":{}}}`)})
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := appliedConfigMap()
			tt.change(live)
			got, err := Drifted(live)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Drifted = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDriftedRejectsBrokenManagedFields(t *testing.T) {
	live := appliedConfigMap()
	live.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationApply, `{"f:data":{"k:notjson":{}}}`)})
	if _, err := Drifted(live); err == nil {
		t.Error("Drifted accepted managed fields it cannot parse")
	}
}
