// Package deploy embeds Sprout's deployment manifests, so the binary (the
// demo) and the tests install exactly the CRDs that ship.
package deploy

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed crds/*.yaml
var crds embed.FS

// CRDs returns the CustomResourceDefinitions in crds/.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return readCRDs(crds, "crds/*.yaml")
}

// readCRDs reads the CRDs of the files in fsys that pattern matches.
func readCRDs(fsys embed.FS, pattern string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		if path.Base(f) == "kustomization.yaml" {
			continue // lists the CRDs for kustomize
		}
		data, err := fsys.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

//go:embed report-crds/*_*.yaml
var reportCRDs embed.FS

// ReportCRDs returns the PolicyReport and ClusterPolicyReport CRDs in
// report-crds/, which Sprout installs only on demand.
func ReportCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return readCRDs(reportCRDs, "report-crds/*_*.yaml")
}

//go:embed report-crds/openreports/*_*.yaml
var openReportsCRDs embed.FS

// OpenReportsCRDs returns the Report and ClusterReport CRDs in
// report-crds/openreports/, the report API Sprout writes with
// --openreports-enabled.
func OpenReportsCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return readCRDs(openReportsCRDs, "report-crds/openreports/*_*.yaml")
}
