package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sprout-gitops/sprout/fixtures"
)

// runDiffWithStderr runs `sprout diff` in-process and returns its output,
// its standard error and its exit status.
func runDiffWithStderr(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut syncBuffer
	root := newRootCommand()
	root.SetArgs(append([]string{"diff"}, args...))
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.ExecuteContext(context.Background()); err != nil {
		return out.String(), errOut.String(), exitCode(err)
	}
	return out.String(), errOut.String(), 0
}

// TestDiffAsANewUserSeesIt: a configured object's diff does not show
// Sprout's sprout.dev/applied stamp changing; a new policy without
// generateExisting shows what it would create for the triggers that exist
// (it used to show nothing, exit 0); and diff ends with a summary line.
func TestDiffAsANewUserSeesIt(t *testing.T) {
	cp := startRun(t)
	applyScenario(t, cp, "zk-kafka-address", "policy.yaml", "triggers.yaml")
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	eventually(t, "the generated ConfigMap", func(ctx context.Context) bool {
		_, err := kube.CoreV1().ConfigMaps("team-red").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		return err == nil
	})
	kubeconfig := writeKubeconfig(t, cp)
	policy, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	folder := func(content string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}

	changed := folder(strings.Replace(string(policy), "192.168.10.10:2181", "10.0.0.1:2181", 1))
	out, errOut, code := runDiffWithStderr(t, "--kubeconfig", kubeconfig, "--policy-dir", changed)
	if code != 1 || !strings.Contains(out, "+  ZK_ADDRESS: 10.0.0.1:2181") {
		t.Errorf("a changed policy: exit %d, output:\n%s", code, out)
	}
	if strings.Contains(out, "sprout.dev/applied") {
		t.Errorf("the diff shows Sprout's own stamp:\n%s", out)
	}
	if want := "diff: 1 policy, 1 trigger, 1 object, 0 errors: 0 to create, 1 to change, 0 to delete\n"; !strings.HasSuffix(errOut, want) {
		t.Errorf("standard error %q does not end with %q", errOut, want)
	}

	newPolicy := fixtures.MustPolicyFile("welcome", fixtures.Params{Name: "welcome-red", Color: "red"})
	out, errOut, code = runDiffWithStderr(t, "--kubeconfig", kubeconfig, "--policy-dir", folder(newPolicy))
	if code != 1 {
		t.Errorf("a new policy: exit %d, want 1", code)
	}
	for _, want := range []string{
		"# created ConfigMap/team-red/welcome (GeneratingPolicy/welcome-red, a new policy without generateExisting",
		"+  team: team-red",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("a new policy: the diff has no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "team-blue") {
		t.Errorf("a new policy: the diff shows a Namespace it does not match:\n%s", out)
	}
	if !strings.Contains(errOut, "diff: 1 policy, 1 trigger, 1 object, 0 errors: 1 to create") {
		t.Errorf("a new policy: summary %q", errOut)
	}
	if _, err := kube.CoreV1().ConfigMaps("team-red").Get(context.Background(), "welcome", metav1.GetOptions{}); err == nil {
		t.Error("sprout diff created the ConfigMap")
	}
}
