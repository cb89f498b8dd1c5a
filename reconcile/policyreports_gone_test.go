package reconcile_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sprout-gitops/sprout/fixtures"
)

// A deleted trigger's report goes with it, deleted by Sprout: the test
// control plane runs no garbage collector, which would delete it later.
// The policy does not synchronize, so its trigger informer watches every
// ConfigMap, and a DELETE says the trigger is gone.
func TestReportGoesWithItsTrigger(t *testing.T) {
	installReportCRDs(t)
	runController(t, nil)
	tb := newTable(t, "report-gone")
	for _, name := range []string{"kept", "deleted"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tb.ns, Labels: map[string]string{"report-gone": "yes"}}}
		if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tb.applyPolicy(fixtures.MustPolicyFile("selected", fixtures.Params{Name: "gone", Selector: []string{"report-gone"}}))
	t.Cleanup(func() { tb.deletePolicy("gone") })
	kept, deleted := tb.get("kept"), tb.get("deleted")
	any := func(*unstructured.Unstructured) bool { return true }
	waitReport(t, tb.ns, kept.UID, any)
	waitReport(t, tb.ns, deleted.UID, any)

	tb.delete("deleted")
	waitNoReport(t, tb.ns, deleted.UID)
	if _, err := reportClient(tb.ns).Get(context.Background(), string(kept.UID), metav1.GetOptions{}); err != nil {
		t.Errorf("the report of a trigger still there: %v", err)
	}
}
