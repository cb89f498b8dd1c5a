package policyreport

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A report's kind and group follow the API and the trigger's scope; an
// openreports.io report has Kyverno's empty source; a result not scored
// leaves scored out, as Kyverno's types do (omitempty).
func TestReportObjectInEitherAPI(t *testing.T) {
	res := entries{entryOf(&Result{Policy: "p", Rule: "p", Result: StatusPass}, 7)}
	for _, tc := range []struct {
		api        API
		namespace  string
		apiVersion string
		kind       string
		hasSrc     bool
	}{
		{WGPolicy, "ns", "wgpolicyk8s.io/v1alpha2", "PolicyReport", false},
		{WGPolicy, "", "wgpolicyk8s.io/v1alpha2", "ClusterPolicyReport", false},
		{OpenReports, "ns", "openreports.io/v1alpha1", "Report", true},
		{OpenReports, "", "openreports.io/v1alpha1", "ClusterReport", true},
	} {
		u := sent(t, reportOf(tc.api, Trigger{APIVersion: "v1", Kind: "ConfigMap", Namespace: tc.namespace, Name: "t", UID: "u"}, res))
		if u.GetAPIVersion() != tc.apiVersion || u.GetKind() != tc.kind || u.GetNamespace() != tc.namespace {
			t.Errorf("API %d, namespace %q: %s %s in %q, want %s %s", tc.api, tc.namespace, u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), tc.apiVersion, tc.kind)
		}
		if src, ok := u.Object["source"]; ok != tc.hasSrc || (ok && src != "") {
			t.Errorf("API %d: source %v (set: %v), want set to \"\": %v", tc.api, src, ok, tc.hasSrc)
		}
		want := map[string]any{"source": Source, "policy": "p", "rule": "p", "result": StatusPass,
			"timestamp": map[string]any{"seconds": int64(7), "nanos": int64(0)}}
		if diff := cmp.Diff(want, u.Object["results"].([]any)[0]); diff != "" {
			t.Errorf("API %d: result (-want +got):\n%s", tc.api, diff)
		}
	}
}

// sent is r as the API server reads it.
func sent(t *testing.T, r *report) *unstructured.Unstructured {
	t.Helper()
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(body); err != nil {
		t.Fatal(err)
	}
	return u
}
