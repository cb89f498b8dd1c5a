package controlplane

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/sprout-gitops/sprout/deploy"
)

// CRDSet names the policy CRDs a control plane installs. Sprout's own CRDs
// (PolicySource, PolicyInventory) are installed with either.
type CRDSet string

// The two sets of policy CRDs Sprout must run under.
const (
	// SproutCRDs are Sprout's, from deploy/crds.
	SproutCRDs CRDSet = "sprout"
	// KyvernoCRDs are Kyverno's own, vendored in testdata/kyverno: those a
	// cluster that runs Kyverno has.
	KyvernoCRDs CRDSet = "kyverno"
)

// CRDsEnv names the environment variable that picks the policy CRDs of the
// test control plane: "kyverno" or "sprout" (the default).
const CRDsEnv = "SPROUT_TEST_CRDS"

// policyGroup is the API group of the policy CRDs (api/policies/v1.Group,
// which the harness does not import: it needs only this name).
const policyGroup = "policies.kyverno.io"

//go:embed testdata/kyverno/*.yaml
var kyverno embed.FS

// CRDsFromEnv returns the set $SPROUT_TEST_CRDS names, Sprout's when unset.
func CRDsFromEnv() (CRDSet, error) {
	switch set := CRDSet(os.Getenv(CRDsEnv)); set {
	case "", SproutCRDs:
		return SproutCRDs, nil
	case KyvernoCRDs:
		return set, nil
	default:
		return "", fmt.Errorf("%s=%q: want %q or %q", CRDsEnv, set, SproutCRDs, KyvernoCRDs)
	}
}

// CRDs returns the CRDs a control plane of the set installs.
func (s CRDSet) CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := deploy.CRDs()
	if err != nil || s == SproutCRDs {
		return crds, err
	}
	if s != KyvernoCRDs {
		return nil, fmt.Errorf("no CRD set %q", s)
	}
	policies, err := KyvernoPolicyCRDs()
	if err != nil {
		return nil, err
	}
	// Kyverno's replace Sprout's of the same name; the vendored set holds
	// only the CRDs whose schema Sprout's must follow (PolicyException's is
	// not vendored), so Sprout's others stay.
	out := policies
	for _, crd := range crds {
		if !slices.ContainsFunc(policies, func(k *apiextensionsv1.CustomResourceDefinition) bool { return k.Name == crd.Name }) {
			out = append(out, crd)
		}
	}
	return out, nil
}

// KyvernoPolicyCRDs returns Kyverno's GeneratingPolicy and
// NamespacedGeneratingPolicy CRDs, as Kyverno v1.19 ships them.
func KyvernoPolicyCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(kyverno, "testdata/kyverno/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := kyverno.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if !strings.HasSuffix(crd.Name, "."+policyGroup) {
			return nil, fmt.Errorf("%s: %s is not a policy CRD", f, crd.Name)
		}
		out = append(out, crd)
	}
	return out, nil
}

//go:embed testdata/kyverno-globalcontext/kyverno.io_globalcontextentries.yaml
var kyvernoGlobalContext []byte

// KyvernoGlobalContextCRD returns Kyverno's GlobalContextEntry CRD, as
// Kyverno v1.19 ships it. Sprout does not ship it; the control plane
// installs it under either set, as a cluster whose policies read entries
// has it from Kyverno.
func KyvernoGlobalContextCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(kyvernoGlobalContext, crd); err != nil {
		return nil, fmt.Errorf("the GlobalContextEntry CRD: %w", err)
	}
	return crd, nil
}
