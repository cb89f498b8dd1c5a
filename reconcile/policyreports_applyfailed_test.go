package reconcile_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestReportSaysErrorWhenTheApplyFailed: a policy that generates a kind
// the API server does not serve reports an error for the trigger, as
// Kyverno does ("no matches for kind"), not the pass its evaluation gave.
func TestReportSaysErrorWhenTheApplyFailed(t *testing.T) {
	installReportCRDs(t)
	runController(t, nil)
	tb := newTable(t, "reported-unserved")
	doc := strings.Replace(reportPolicy("reported-unserved"), `"apiVersion": "v1", "kind": "ConfigMap"`, `"apiVersion": "example.com/v1", "kind": "Widget"`, 1)
	tb.applyPolicy(doc)
	t.Cleanup(func() { tb.deletePolicy("reported-unserved") })
	tb.trigger("w", "reported", "1")
	w := tb.get("w")
	report := waitReport(t, tb.ns, w.UID, func(u *unstructured.Unstructured) bool { return firstResult(u)["result"] == "error" })
	if msg, _ := firstResult(report)["message"].(string); !strings.Contains(msg, "Widget") {
		t.Errorf("the error reported does not name the kind: %q", msg)
	}
}
