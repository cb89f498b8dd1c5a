package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/internal/syncbuf"
)

// execute runs the sprout command in-process with args and returns its
// standard output, its standard error and its error.
func execute(args ...string) (string, string, error) {
	var out, errOut syncbuf.Buffer
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// diffCmd runs `sprout diff` in-process and returns its output, its
// standard error, its exit status and its error.
func diffCmd(args ...string) (string, string, int, error) {
	out, errOut, err := execute(append([]string{"diff"}, args...)...)
	if err != nil {
		return out, errOut, exitCode(err), err
	}
	return out, errOut, 0, nil
}

// applyObjects creates or updates objs in the cluster of config.
func applyObjects(t *testing.T, config *rest.Config, objs ...*unstructured.Unstructured) {
	t.Helper()
	a, err := manifest.NewApplier(config)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(context.Background(), objs...); err != nil {
		t.Fatal(err)
	}
}

// applyDocs applies the objects of a YAML text to cp.
func applyDocs(t *testing.T, cp *controlplane.ControlPlane, docs string) {
	t.Helper()
	objs, err := manifest.Parse([]byte(docs))
	if err != nil {
		t.Fatal(err)
	}
	applyObjects(t, cp.Config, objs...)
}

// applyScenario applies files of a fixtures scenario to cp, in order.
func applyScenario(t *testing.T, cp *controlplane.ControlPlane, scenario string, files ...string) {
	t.Helper()
	for _, file := range files {
		objs, err := fixtures.Objects(scenario, file)
		if err != nil {
			t.Fatal(err)
		}
		applyObjects(t, cp.Config, objs...)
	}
}

// tableRow returns the row `kubectl get -o wide` prints for the object at
// the API path, by column name, an empty cell left out; nil while the
// object cannot be read.
func tableRow(ctx context.Context, kube kubernetes.Interface, path string) map[string]string {
	raw, err := kube.Discovery().RESTClient().Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Param("includeObject", "None").DoRaw(ctx)
	var table metav1.Table
	if err != nil || json.Unmarshal(raw, &table) != nil || len(table.Rows) != 1 {
		return nil
	}
	row := map[string]string{}
	for i, c := range table.ColumnDefinitions {
		if i < len(table.Rows[0].Cells) && table.Rows[0].Cells[i] != nil {
			row[c.Name] = fmt.Sprint(table.Rows[0].Cells[i])
		}
	}
	return row
}

// runZKKafka starts a control plane and `sprout run` on it, applies the
// zk-kafka-address scenario and waits for the ConfigMap it generates. It
// returns the control plane, a client of it and the scenario's policy, for
// a test to change.
func runZKKafka(t *testing.T) (*controlplane.ControlPlane, kubernetes.Interface, string) {
	t.Helper()
	cp := startRun(t)
	applyScenario(t, cp, "zk-kafka-address", "policy.yaml", "triggers.yaml")
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	eventually(t, "the generated ConfigMap", func(ctx context.Context) bool {
		_, err := kube.CoreV1().ConfigMaps("team-red").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		return err == nil
	})
	policy, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cp, kube, string(policy)
}

// policyFolder writes content as policy.yaml of a new folder, for
// --policy-dir.
func policyFolder(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
