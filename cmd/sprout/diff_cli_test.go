package main

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sprout-gitops/sprout/fixtures"
)

// TestDiffAsANewUserSeesIt: a configured object's diff does not show
// Sprout's sprout.dev/applied stamp changing; a new policy without
// generateExisting shows what it would create for the triggers that exist
// (it used to show nothing, exit 0); and diff ends with a summary line.
func TestDiffAsANewUserSeesIt(t *testing.T) {
	t.Parallel()
	cp, kube, policy := runZKKafka(t)
	kubeconfig := writeKubeconfig(t, cp)

	changed := policyFolder(t, strings.Replace(policy, "192.168.10.10:2181", "10.0.0.1:2181", 1))
	out, errOut, code, _ := diffCmd("--kubeconfig", kubeconfig, "--policy-dir", changed)
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
	out, errOut, code, _ = diffCmd("--kubeconfig", kubeconfig, "--policy-dir", policyFolder(t, newPolicy))
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
