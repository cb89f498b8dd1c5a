package deploy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sprout-gitops/sprout/deploy"
)

// The chart installs the report CRDs of deploy/report-crds when asked, and
// turns reports off when asked; by default it does neither.
func TestChartPolicyReports(t *testing.T) {
	for _, crd := range ofKind(mustRender(t, ""), "CustomResourceDefinition") {
		if strings.HasSuffix(crd.GetName(), ".wgpolicyk8s.io") {
			t.Errorf("the default values render the report CRD %s", crd.GetName())
		}
	}
	want, err := deploy.ReportCRDs()
	if err != nil {
		t.Fatal(err)
	}
	objs := mustRender(t, "crds: {install: false}\npolicyReports: {enabled: false, installCRDs: true}")
	got := ofKind(objs, "CustomResourceDefinition")
	if len(got) != len(want) {
		t.Fatalf("policyReports.installCRDs renders %d CRDs, want the %d of deploy/report-crds", len(got), len(want))
	}
	for i, crd := range want {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			t.Fatal(err)
		}
		delete(u, "status")
		delete(u["metadata"].(map[string]any), "creationTimestamp")
		g := got[i].Object
		delete(g, "status")
		if diff := cmp.Diff(u["spec"], g["spec"]); diff != "" {
			t.Errorf("the chart's %s differs from deploy/report-crds' (-deploy +chart; run make generate):\n%s", crd.Name, diff)
		}
	}
	deployments := ofKind(objs, "Deployment")
	if len(deployments) != 1 {
		t.Fatalf("%d Deployments rendered, want 1", len(deployments))
	}
	containers, _, _ := unstructured.NestedSlice(deployments[0].Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	if !slices.Contains(args, "--policy-reports=false") {
		t.Errorf("policyReports.enabled false: args %v lack --policy-reports=false", args)
	}
}
