package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sprout-gitops/sprout/internal/manifest"
)

// readTestObjects reads the objects of testdata files.
func readTestObjects(t *testing.T, files ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, objs...)
	}
	return out
}

// plannedObjects runs `sprout diff -o json` and returns the objects it
// would write, by Object (Kind/namespace/name).
func plannedObjects(t *testing.T, args ...string) map[string]plannedObject {
	t.Helper()
	out, code, err := runDiffCommand(t, append(args, "-o", "json")...)
	if code != 1 {
		t.Fatalf("sprout diff %v: exit %d, %v\n%s", args, code, err, out)
	}
	var listed []plannedObject
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	byObject := map[string]plannedObject{}
	for _, o := range listed {
		byObject[o.Object] = o
	}
	return byObject
}

// TestDiffAppliesExceptionsAndEntries: with --enable-policy-exceptions,
// `sprout diff` plans what `sprout run` with it would do: the
// PolicyExceptions of a policy folder and of the cluster skip the triggers
// they except, which get nothing; without it they do. A policy that reads
// globalContext plans from the cluster's GlobalContextEntries. Before, diff
// had no exception flags, its wrapped sources dropped the exceptions, and
// no entry was found.
func TestDiffAppliesExceptionsAndEntries(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	kubeconfig := writeKubeconfig(t, cp)
	const exc, gctx = "testdata/exceptions", "testdata/globalcontext"
	apply(t, cp.Config, readTestObjects(t, exc+"/resource.yaml", gctx+"/triggers.yaml"))
	for _, ns := range []string{"teams", "other"} {
		apply(t, cp.Config, []*unstructured.Unstructured{{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}})
	}
	apply(t, cp.Config, readTestObjects(t, gctx+"/objects.yaml", gctx+"/entries.yaml"))

	folder := copyToFolder(t, exc+"/policy.yaml", exc+"/exception.yaml")
	const excepted, generated = "ConfigMap/testing/zk-kafka-address", "ConfigMap/production/zk-kafka-address"
	planned := plannedObjects(t, "--kubeconfig", kubeconfig, "--policy-dir", folder, "--enable-policy-exceptions")
	if _, ok := planned[excepted]; ok {
		t.Errorf("the folder's exception: %s is planned", excepted)
	}
	if _, ok := planned[generated]; !ok {
		t.Errorf("the folder's exception: %s is not planned: %v", generated, keys(planned))
	}
	planned = plannedObjects(t, "--kubeconfig", kubeconfig, "--policy-dir", folder)
	if _, ok := planned[excepted]; !ok {
		t.Errorf("without --enable-policy-exceptions: %s is not planned", excepted)
	}

	cluster := readTestObjects(t, exc+"/policy.yaml", exc+"/exception.yaml")
	for _, o := range cluster[1:] {
		o.SetNamespace("default")
	}
	apply(t, cp.Config, cluster)
	planned = plannedObjects(t, "--kubeconfig", kubeconfig, "--enable-policy-exceptions")
	_, plannedExcepted := planned[excepted]
	_, plannedGenerated := planned[generated]
	if plannedExcepted || !plannedGenerated {
		t.Errorf("the cluster's exception: %s planned %v, %s planned %v", excepted, plannedExcepted, generated, plannedGenerated)
	}

	planned = plannedObjects(t, "--kubeconfig", kubeconfig, "--policy-dir", copyToFolder(t, gctx+"/policy.yaml"))
	teams, ok := planned["ConfigMap/shop/teams"]
	if !ok {
		t.Fatalf("the entry's reader plans no ConfigMap/shop/teams: %v", keys(planned))
	}
	if data, _, _ := unstructured.NestedStringMap(teams.After, "data"); data["names"] != "CHECKOUT,PAYMENTS" {
		t.Errorf("ConfigMap/shop/teams holds %v, want names CHECKOUT,PAYMENTS from the entry's projection", data)
	}
}

func keys(m map[string]plannedObject) string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
