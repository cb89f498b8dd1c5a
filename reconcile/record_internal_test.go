package reconcile

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The records' cache keeps no managed fields: nothing reads them, and each
// read of a record copies it.
func TestRecordsAreCachedWithoutManagedFields(t *testing.T) {
	rec := &unstructured.Unstructured{}
	rec.SetName("gpol.zk")
	rec.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "sprout", Operation: metav1.ManagedFieldsOperationApply}})
	got, err := withoutManagedFields(rec)
	if err != nil {
		t.Fatal(err)
	}
	if mf := got.(*unstructured.Unstructured).GetManagedFields(); len(mf) != 0 || got.(*unstructured.Unstructured).GetName() != "gpol.zk" {
		t.Errorf("cached record: managed fields %v, name %q; want none, and the rest kept", mf, got.(*unstructured.Unstructured).GetName())
	}
}
