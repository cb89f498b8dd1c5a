package reconcile_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sprout-gitops/sprout/deploy"
	"github.com/sprout-gitops/sprout/policyreport"
	"github.com/sprout-gitops/sprout/reconcile"
)

// openReportsOptions are the controller's options with reports in
// openreports.io's API.
func openReportsOptions() reconcile.Options {
	opts := reconcile.DefaultOptions()
	o := policyreport.DefaultOptions()
	o.API = policyreport.OpenReports
	opts.PolicyReports = &o
	return opts
}

// openReportClient is reportClient for openreports.io's reports.
var openReportClient = reportsOf(policyreport.Reports, policyreport.ClusterReports)

// asOpenReport is the wgpolicyk8s.io report want as Kyverno writes it with
// --openreportsEnabled (pkg/utils/report NewPolicyReport, pkg/openreports):
// a Report or ClusterReport with the same metadata, scope, results and
// summary, and a source left empty.
func asOpenReport(want *unstructured.Unstructured) *unstructured.Unstructured {
	u := want.DeepCopy()
	u.SetAPIVersion("openreports.io/v1alpha1")
	u.SetKind(strings.Replace(u.GetKind(), "PolicyReport", "Report", 1))
	u.Object["source"] = ""
	return u
}

// With --openreports-enabled, a trigger's report is an openreports.io
// Report holding what Kyverno's holds, field by field, and no
// wgpolicyk8s.io report is written, though its CRDs are there too.
func TestOpenReportsAsKyvernoWritesThem(t *testing.T) {
	installReportCRDs(t)
	installCRDsOf(t, deploy.OpenReportsCRDs)
	runController(t, func(o *reconcile.Options) { o.PolicyReports = openReportsOptions().PolicyReports })
	tb := newTable(t, "openreports")
	tb.applyPolicy(reportPolicy("openreports"))
	t.Cleanup(func() { tb.deletePolicy("openreports") })
	tb.trigger("good", "reported", "1")
	good := tb.get("good")
	got := waitReportIn(t, openReportClient(tb.ns), good.UID, func(*unstructured.Unstructured) bool { return true })
	checkReport(t, got, asOpenReport(kyvernoReport(good, map[string]any{
		"source": "KyvernoGeneratingPolicy", "policy": "openreports", "rule": "openreports", "result": "pass",
		"message": "policy evaluated successfully", "scored": true, "category": "Multi-Tenancy", "severity": "medium",
		"properties": map[string]any{
			"process": "admission review", "owner": "team-good",
			"generated-resources": "/v1, Kind=ConfigMap Name=good-out Namespace=openreports",
		},
	})))
	if _, err := reportClient(tb.ns).Get(context.Background(), string(good.UID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a wgpolicyk8s.io report was written too (%v)", err)
	}
}

// A restart with openreports.io reports writes none whose results did not
// change, as with wgpolicyk8s.io's.
func TestARestartWritesNoUnchangedOpenReport(t *testing.T) {
	installCRDsOf(t, deploy.OpenReportsCRDs)
	restartWritesNoUnchangedReport(t, "openreports-restart", openReportsOptions(), openReportClient)
}
