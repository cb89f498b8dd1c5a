package reconcile_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestExceptedTriggersAreReportedAsKyvernoReportsThem: a trigger a
// PolicyException skips gets the result Kyverno's gpol engine gives it:
// rule "exception", skip, the exceptions named in the message and in the
// property "exceptions"; the exception's reportResult pass makes it a pass,
// and of several exceptions the one with the highest polex.kyverno.io/priority
// decides.
func TestExceptedTriggersAreReportedAsKyvernoReportsThem(t *testing.T) {
	installReportCRDs(t)
	runController(t, withExceptions(""))
	tb := newTable(t, "reported-exc")
	applyException(t, exceptionDoc(tb.ns, "skip-all", "reported"))
	applyException(t, `apiVersion: policies.kyverno.io/v1
kind: PolicyException
metadata:
  name: pass-first
  namespace: reported-exc
  labels: {polex.kyverno.io/priority: "2"}
spec:
  reportResult: pass
  policyRefs:
  - {kind: GeneratingPolicy, name: reported}
  matchConditions:
  - name: first
    expression: object.metadata.name == "first"
`)
	// The policy generates for triggers created after it only.
	tb.applyPolicy(reportPolicy("reported"))
	t.Cleanup(func() { tb.deletePolicy("reported") })
	tb.trigger("first", "reported", "1")
	tb.trigger("second", "reported", "1")
	first, second := tb.get("first"), tb.get("second")
	if tb.get("first-out") != nil || tb.get("second-out") != nil {
		t.Error("an excepted trigger generated its object")
	}

	result := func(status, verb string, exceptions, names string) map[string]any {
		return map[string]any{
			"source": "KyvernoGeneratingPolicy", "policy": "reported", "rule": "exception", "result": status,
			"message": "rule is " + verb + " due to policy exception: " + exceptions,
			"scored":  true, "category": "Multi-Tenancy", "severity": "medium",
			"properties": map[string]any{"process": "admission review", "exceptions": names},
		}
	}
	anyReport := func(*unstructured.Unstructured) bool { return true }
	checkReport(t, waitReport(t, tb.ns, second.UID, anyReport),
		kyvernoReport(second, result("skip", "skipped", "reported-exc/skip-all", "skip-all")))
	got := waitReport(t, tb.ns, first.UID, anyReport)
	results, _, _ := unstructured.NestedSlice(got.Object, "results")
	if len(results) != 1 {
		t.Fatalf("first's report holds %d results, want 1: %v", len(results), results)
	}
	// Both exceptions skip it, in the order Sprout holds them: the message
	// names both, the priority picks pass.
	r := results[0].(map[string]any)
	if r["result"] != "pass" || r["rule"] != "exception" {
		t.Errorf("first's result %v: want the rule exception passed, as the exception with the highest priority says", r)
	}
	props, _ := r["properties"].(map[string]any)
	if props["exceptions"] != "skip-all,pass-first" && props["exceptions"] != "pass-first,skip-all" {
		t.Errorf("first's exceptions property %v: want both exceptions named", props["exceptions"])
	}
}
