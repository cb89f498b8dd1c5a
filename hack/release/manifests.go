package main

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// manifests are the install manifests a release ships: the file each is
// written to, and the folder of deploy/ it renders.
var manifests = []struct{ file, dir string }{
	{"install.yaml", "."},
	// For a cluster that keeps Kyverno's policy CRDs (docs/migrating.md).
	{"install-without-policy-crds.yaml", "without-policy-crds"},
}

// writeManifests renders each install manifest into Dist and returns the
// names it wrote.
func (r release) writeManifests() ([]string, error) {
	var names []string
	for _, m := range manifests {
		data, err := r.render(m.dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.file, err)
		}
		header := fmt.Sprintf("# Sprout %s (commit %s): kubectl apply -f %s\n", r.Version, r.Commit, m.file)
		if err := os.WriteFile(filepath.Join(r.Dist, m.file), append([]byte(header), data...), 0o644); err != nil { //nolint:gosec // a public manifest
			return nil, fmt.Errorf("%s: %w", m.file, err)
		}
		names = append(names, m.file)
	}
	return names, nil
}

// render runs kustomize, as `kubectl apply -k` does, on an overlay of
// Deploy/dir that sets the image's tag to the version: the overlay a user
// would write, so the base keeps its placeholder and the release needs no
// edit to it.
func (r release) render(dir string) ([]byte, error) {
	base, err := filepath.Abs(filepath.Join(r.Deploy, dir))
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "sprout-release-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	// kustomize takes a base only by a relative path.
	rel, err := filepath.Rel(tmp, base)
	if err != nil {
		return nil, err
	}
	overlay, err := yaml.Marshal(kusttypes.Kustomization{
		TypeMeta:  kusttypes.TypeMeta{APIVersion: kusttypes.KustomizationVersion, Kind: kusttypes.KustomizationKind},
		Resources: []string{filepath.ToSlash(rel)},
		Images:    []kusttypes.Image{{Name: repository, NewTag: r.Version}},
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), overlay, 0o600); err != nil {
		return nil, err
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), tmp)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", base, err)
	}
	return resources.AsYaml()
}
