package deploy_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/sprout-gitops/sprout/deploy"
	"github.com/sprout-gitops/sprout/internal/controlplane"
)

// TestPolicyCRDsMatchKyverno compares Sprout's policy CRDs with Kyverno's own
// (vendored in internal/controlplane/testdata/kyverno) field by field at every
// served version: what one accepts and stores, the other must too. Sprout may
// add fields (optional ones, anywhere) and printer columns; every field
// Kyverno declares must have the same type, format, default, enum, bounds,
// required fields, list and map types and validation rules.
func TestPolicyCRDsMatchKyverno(t *testing.T) {
	kyverno, err := controlplane.KyvernoPolicyCRDs()
	if err != nil {
		t.Fatal(err)
	}
	sprout, err := deploy.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(kyverno) != 2 {
		t.Fatalf("%d Kyverno CRDs vendored, want GeneratingPolicy's and NamespacedGeneratingPolicy's", len(kyverno))
	}
	for _, k := range kyverno {
		i := slices.IndexFunc(sprout, func(s *apiextensionsv1.CustomResourceDefinition) bool { return s.Name == k.Name })
		if i < 0 {
			t.Errorf("deploy/crds has no %s", k.Name)
			continue
		}
		for _, d := range compareCRD(k, sprout[i]) {
			t.Errorf("%s: %s", k.Name, d)
		}
	}
}

// compareCRD lists where Sprout's CRD s accepts or stores other than Kyverno's k.
func compareCRD(k, s *apiextensionsv1.CustomResourceDefinition) []string {
	var diffs []string
	differ := func(what string, kv, sv any) {
		if !reflect.DeepEqual(kv, sv) {
			diffs = append(diffs, fmt.Sprintf("%s: Kyverno's %v, Sprout's %v", what, kv, sv))
		}
	}
	differ("group", k.Spec.Group, s.Spec.Group)
	differ("scope", k.Spec.Scope, s.Spec.Scope)
	kn, sn := k.Spec.Names, s.Spec.Names
	differ("names", []string{kn.Kind, kn.ListKind, kn.Plural, kn.Singular}, []string{sn.Kind, sn.ListKind, sn.Plural, sn.Singular})
	for _, n := range kn.ShortNames {
		if !slices.Contains(sn.ShortNames, n) {
			diffs = append(diffs, "no short name "+n)
		}
	}
	for _, c := range kn.Categories {
		if !slices.Contains(sn.Categories, c) {
			diffs = append(diffs, "not in category "+c)
		}
	}
	differ("conversion", conversionStrategy(k), conversionStrategy(s))
	differ("versions", versionNames(k), versionNames(s))
	for _, kv := range k.Spec.Versions {
		i := slices.IndexFunc(s.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == kv.Name })
		if i < 0 {
			continue
		}
		sv := s.Spec.Versions[i]
		v := kv.Name + ": "
		differ(v+"served", kv.Served, sv.Served)
		differ(v+"storage", kv.Storage, sv.Storage)
		differ(v+"deprecated", kv.Deprecated, sv.Deprecated)
		differ(v+"deprecation warning", kv.DeprecationWarning, sv.DeprecationWarning)
		differ(v+"subresources", kv.Subresources, sv.Subresources)
		for _, d := range compareSchema("", schemaMap(kv.Schema), schemaMap(sv.Schema)) {
			diffs = append(diffs, v+d)
		}
	}
	return diffs
}

func conversionStrategy(crd *apiextensionsv1.CustomResourceDefinition) apiextensionsv1.ConversionStrategyType {
	if crd.Spec.Conversion == nil {
		return apiextensionsv1.NoneConverter
	}
	return crd.Spec.Conversion.Strategy
}

func versionNames(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		out = append(out, v.Name)
	}
	sort.Strings(out)
	return out
}

// schemaMap is a version's schema as JSON, the form the API server applies.
func schemaMap(v *apiextensionsv1.CustomResourceValidation) map[string]any {
	if v == nil {
		return nil
	}
	data, err := json.Marshal(v.OpenAPIV3Schema)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		panic(err)
	}
	return m
}

// compareSchema walks Kyverno's schema k and Sprout's s together. Every
// keyword but description must be equal, except that s may declare
// properties k does not: an added field is optional, since required must
// be equal.
func compareSchema(path string, k, s map[string]any) []string {
	if s == nil {
		return []string{fmt.Sprintf("%s: Kyverno declares it, Sprout does not", orRoot(path))}
	}
	var diffs []string
	for _, key := range keys(k, s) {
		kv, sv := k[key], s[key]
		switch key {
		case "description":
		case "properties":
			kp, _ := kv.(map[string]any)
			sp, _ := sv.(map[string]any)
			for _, name := range keys(kp, nil) {
				sub, _ := sp[name].(map[string]any)
				diffs = append(diffs, compareSchema(path+"."+name, kp[name].(map[string]any), sub)...)
			}
		case "items", "additionalProperties":
			km, kok := kv.(map[string]any)
			sm, sok := sv.(map[string]any)
			if kok && sok {
				suffix := "[]"
				if key == "additionalProperties" {
					suffix = "[*]"
				}
				diffs = append(diffs, compareSchema(path+suffix, km, sm)...)
				continue
			}
			fallthrough
		default:
			if !reflect.DeepEqual(kv, sv) {
				diffs = append(diffs, fmt.Sprintf("%s: %s is %v in Kyverno's, %v in Sprout's", orRoot(path), key, show(kv), show(sv)))
			}
		}
	}
	return diffs
}

// keys returns the keys of a and b, sorted and once each.
func keys(a, b map[string]any) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func orRoot(path string) string {
	if path == "" {
		return "the object"
	}
	return path[1:]
}

func show(v any) string {
	if v == nil {
		return "absent"
	}
	data, _ := json.Marshal(v)
	return string(data)
}
