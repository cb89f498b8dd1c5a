package reconcile_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// getTable asks the API server for the table kubectl get prints.
func getTable(t *testing.T, path string) metav1.Table {
	t.Helper()
	raw, err := kubernetes.NewForConfigOrDie(cfg).Discovery().RESTClient().Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	return table
}

// row returns the named row of a table as column name → printed value.
func row(t *testing.T, table metav1.Table, name string) map[string]string {
	t.Helper()
	for _, r := range table.Rows {
		if len(r.Cells) > 0 && r.Cells[0] == name {
			out := map[string]string{}
			for i, c := range table.ColumnDefinitions {
				if i < len(r.Cells) && r.Cells[i] != nil {
					b, _ := json.Marshal(r.Cells[i])
					out[c.Name] = strings.Trim(string(b), `"`)
				}
			}
			return out
		}
	}
	t.Fatalf("no row %s", name)
	return nil
}

// TestKubectlGetShowsPoliciesAndRecords: kubectl get gpol and kubectl get
// pinv show each policy's readiness, source, revision and counts.
func TestKubectlGetShowsPoliciesAndRecords(t *testing.T) {
	onlySproutCRDs(t, "the printer columns it reads")
	tb := newTable(t, "kubectl")
	tb.applyPolicy(derivedPolicy("shown", "kubectl", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("shown") })
	tb.trigger("a", "kubectl", "a1")
	tb.trigger("b", "kubectl", "b1")
	runUntilSynced(t, cfg, "GeneratingPolicy/shown")

	rec := row(t, getTable(t, "/apis/sprout.dev/v1alpha1/policyinventories"), "gpol.shown")
	want := map[string]string{"POLICY": "shown", "SOURCE": "cluster", "REVISION": "generation 1", "READY": "True", "TRIGGERS": "2", "OBJECTS": "2"}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("kubectl get pinv: %s = %q, want %q (row %v)", k, rec[k], v, rec)
		}
	}
	u, err := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies).Get(context.Background(), "shown", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ready, _, _ := unstructured.NestedBool(u.Object, "status", "conditionStatus", "ready"); !ready {
		t.Errorf("Kyverno's status.conditionStatus.ready is not true: %v", u.Object["status"])
	}
	pol := row(t, getTable(t, "/apis/policies.kyverno.io/v1/generatingpolicies"), "shown")
	for k, v := range map[string]string{"READY": "True", "TRIGGERS": "2", "OBJECTS": "2"} {
		if pol[k] != v {
			t.Errorf("kubectl get gpol: %s = %q, want %q (row %v)", k, pol[k], v, pol)
		}
	}
}
