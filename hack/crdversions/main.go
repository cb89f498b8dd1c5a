// Command crdversions turns the single-version CRDs that controller-gen writes
// from api/v1 into the served set Kyverno users expect: the same schema at
// every version in apiv1.ServedVersions, v1beta1 as the storage version,
// v1alpha1 deprecated, and NamespacedGeneratingPolicy without v1alpha1, as in
// Kyverno's CRDs. It rewrites the files it is given.
package main

import (
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

const (
	storageVersion    = "v1beta1"
	deprecatedVersion = "v1alpha1"
)

func main() {
	for _, path := range os.Args[1:] {
		if err := rewrite(path); err != nil {
			fmt.Fprintf(os.Stderr, "crdversions: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func rewrite(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return err
	}
	var generated *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == apiv1.Version {
			generated = &crd.Spec.Versions[i]
		}
	}
	if generated == nil {
		return fmt.Errorf("no version %s to copy", apiv1.Version)
	}
	var versions []apiextensionsv1.CustomResourceDefinitionVersion
	for _, name := range apiv1.ServedVersions {
		if name == "v1alpha1" && crd.Spec.Names.Kind == apiv1.NamespacedGeneratingPolicyKind {
			continue
		}
		v := *generated.DeepCopy()
		v.Name = name
		v.Served = true
		v.Storage = name == storageVersion
		v.Deprecated = name == deprecatedVersion
		versions = append(versions, v)
	}
	crd.Spec.Versions = versions
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&crd)
	if err != nil {
		return err
	}
	// A CRD manifest carries no status; an empty one only confuses a diff.
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	out, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}
