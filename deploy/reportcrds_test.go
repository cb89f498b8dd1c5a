package deploy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
	sameCRDs(t, want, got, "deploy/report-crds")
	args := argsOf(t, objs)
	if !slices.Contains(args, "--policy-reports=false") {
		t.Errorf("policyReports.enabled false: args %v lack --policy-reports=false", args)
	}
}

// sameCRDs compares the CRDs the chart rendered with those of dir, which
// make generate copies into it.
func sameCRDs(t *testing.T, want []*apiextensionsv1.CustomResourceDefinition, got []*unstructured.Unstructured, dir string) {
	t.Helper()
	for i, crd := range want {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			t.Fatal(err)
		}
		if got[i].GetName() != crd.Name {
			t.Errorf("CRD %d: the chart renders %s, want %s", i, got[i].GetName(), crd.Name)
		}
		if diff := cmp.Diff(u["spec"], got[i].Object["spec"]); diff != "" {
			t.Errorf("the chart's %s differs from %s' (-deploy +chart; run make generate):\n%s", crd.Name, dir, diff)
		}
	}
}
