package deploy_test

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/internal/manifest"
)

// buildAt runs kustomize on dir, as `kubectl apply -k dir` does.
func buildAt(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	data, err := resources.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestOverlayWithoutPolicyCRDs: deploy/without-policy-crds is deploy/ less
// the policy CRDs, for a cluster that keeps Kyverno's; every other
// object is the base's, unchanged.
func TestOverlayWithoutPolicyCRDs(t *testing.T) {
	key := func(o *unstructured.Unstructured) string {
		return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
	}
	overlay := map[string]*unstructured.Unstructured{}
	for _, o := range buildAt(t, "without-policy-crds") {
		overlay[key(o)] = o
	}
	var dropped []string
	for _, o := range buildAt(t, ".") {
		got, ok := overlay[key(o)]
		delete(overlay, key(o))
		switch {
		case o.GetKind() == "CustomResourceDefinition" && strings.HasSuffix(o.GetName(), "."+apiv1.Group):
			if ok {
				t.Errorf("the overlay keeps %s", key(o))
			}
			dropped = append(dropped, o.GetName())
		case !ok:
			t.Errorf("the overlay drops %s", key(o))
		case !reflect.DeepEqual(got.Object, o.Object):
			t.Errorf("the overlay changes %s", key(o))
		}
	}
	for k := range overlay {
		t.Errorf("the overlay adds %s", k)
	}
	slices.Sort(dropped)
	want := []string{"generatingpolicies." + apiv1.Group, "namespacedgeneratingpolicies." + apiv1.Group, "policyexceptions." + apiv1.Group}
	if !slices.Equal(dropped, want) {
		t.Errorf("the overlay drops the CRDs %v, want %v", dropped, want)
	}
}
