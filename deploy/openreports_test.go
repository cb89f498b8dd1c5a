package deploy_test

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sprout-gitops/sprout/deploy"
)

// policyReports.openreports writes the reports in openreports.io's API
// (--openreports-enabled), and installCRDs then installs that API's CRDs,
// those of deploy/report-crds/openreports, and not wgpolicyk8s.io's.
func TestChartOpenReports(t *testing.T) {
	want, err := deploy.OpenReportsCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 2 {
		t.Fatalf("deploy/report-crds/openreports holds %d CRDs, want Report's and ClusterReport's", len(want))
	}
	objs := mustRender(t, "crds: {install: false}\npolicyReports: {openreports: true, installCRDs: true}")
	got := ofKind(objs, "CustomResourceDefinition")
	if len(got) != len(want) {
		t.Fatalf("policyReports.installCRDs with openreports renders %d CRDs, want the %d of deploy/report-crds/openreports", len(got), len(want))
	}
	sameCRDs(t, want, got, "deploy/report-crds/openreports")
	if args := argsOf(t, objs); !slices.Contains(args, "--openreports-enabled") {
		t.Errorf("policyReports.openreports: args %v lack --openreports-enabled", args)
	}
	if args := argsOf(t, mustRender(t, "")); slices.Contains(args, "--openreports-enabled") {
		t.Errorf("the default values write openreports.io reports: args %v", args)
	}
}

// argsOf are the arguments of the one Deployment's container in objs.
func argsOf(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	deployments := ofKind(objs, "Deployment")
	if len(deployments) != 1 {
		t.Fatalf("%d Deployments rendered, want 1", len(deployments))
	}
	containers, _, _ := unstructured.NestedSlice(deployments[0].Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	return args
}
