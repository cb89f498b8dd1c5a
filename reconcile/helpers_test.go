package reconcile_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// installCRD defines the namespaced kind Kind of group at version v1,
// its objects checked against schema, and waits until the API server has
// established it. A kind a previous run defined is kept.
func installCRD(t *testing.T, group, kind string, schema *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	singular := strings.ToLower(kind)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: singular + "s." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: singular + "s", Singular: singular, Kind: kind, ListKind: kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schema},
			}},
		},
	}
	crds := apiextensionsclient.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(context.Background(), crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	poll(t, "the CRD "+crd.Name+" to be established", func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// replaceFile writes content as the file name of dir, replacing it whole,
// as an editor or a checkout does: a poll between os.WriteFile's
// truncation and its write would read an empty file, whose policies are
// gone.
func replaceFile(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// policyRecord waits for the PolicyInventory record of the GeneratingPolicy
// name and returns it. A policy from files is active from when Sprout first
// loads it, which its record marks: triggers created before are existing
// ones, which a policy without generateExisting passes over.
func policyRecord(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	records := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories)
	var rec *unstructured.Unstructured
	poll(t, "the record of "+name, func(ctx context.Context) (bool, error) {
		var err error
		rec, err = records.Get(ctx, "gpol."+name, metav1.GetOptions{})
		return err == nil, nil
	})
	return rec
}

// inParallel calls do for 0 to n-1, workers at a time, and returns the
// first error.
func inParallel(workers, n int, do func(i int) error) error {
	next := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}
