package reconcile_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/fixtures"
)

// TestNoRecordStatusWithoutARecord: a NamespacedGeneratingPolicy whose
// account may do nothing fails before its sync writes a record; its own
// status says why, and the record's status is not written, nor retried
// for ever ("status not written … PolicyInventory … not found", again and
// again with back-off, before).
func TestNoRecordStatusWithoutARecord(t *testing.T) {
	logs, c := runController(t, nil)
	tb := newTable(t, "norecord")
	doc := fixtures.MustPolicyFile("derived", fixtures.Params{Name: "tenant", Namespace: tb.ns, App: "tenant",
		Suffix: "out", Value: "one", Synchronize: true})
	tb.applyPolicy(doc)
	t.Cleanup(func() {
		_ = dynamic.NewForConfigOrDie(cfg).Resource(apiv1.NamespacedGeneratingPolicies).Namespace(tb.ns).Delete(context.Background(), "tenant", metav1.DeleteOptions{})
	})
	poll(t, "the policy's status naming what its account lacks", func(ctx context.Context) (bool, error) {
		cond, err := namespacedPolicyCondition(ctx, tb.ns, "tenant")
		return cond != nil && cond.Status == metav1.ConditionFalse, err
	})
	poll(t, "the controller idle", func(context.Context) (bool, error) { return c.Idle(), nil })
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "status not written") && strings.Contains(line, "norecord") {
			t.Errorf("the record's status was written before the record: %s", line)
		}
	}
}
