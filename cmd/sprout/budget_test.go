package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/sources"
)

// peakBound is the most memory a sprout process refusing an alias bomb may
// have held at once: a small multiple of what it holds idle. Before the
// byte budgets, these bombs took it to gigabytes.
const peakBound = 300 << 20

// policyBomb is a 532 KB policy file anyone who may commit to a policy
// repository can write: a 512 KiB anchor named 2,000 times, a gigabyte
// once expanded, within the limits of file and document size and the YAML
// decoder's own guard.
func policyBomb() string {
	return "apiVersion: policies.kyverno.io/v1\nkind: GeneratingPolicy\nmetadata:\n  name: bomb\n" +
		"  annotations:\n    big: &big " + strings.Repeat("x", 512<<10) + "\n" +
		"spec:\n  copies: [" + strings.TrimSuffix(strings.Repeat("*big, ", 2000), ", ") + "]\n"
}

// tenantBomb is the text a tenant hands yaml.parse: 196 KiB whose aliases
// name one long string 16,384 times, 16,386 values in all.
func tenantBomb() string {
	aliases := strings.Repeat("- *s\n", 16384)
	return "- &s " + strings.Repeat("x", 196<<10-len(aliases)-len("- &s \n")) + "\n" + aliases
}

// writeFile writes content to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// maxRSS is the peak resident memory of an exited process, in bytes.
func maxRSS(t *testing.T, cmd *exec.Cmd) int64 {
	t.Helper()
	usage, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no resource usage for the process")
	}
	return usage.Maxrss << 10 // KiB on Linux
}

// vmHWM is the peak resident memory of a running process, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// TestRenderRefusesAliasBombs: `sprout render` of the policy bomb, or of a
// good policy with a trigger file built the same way, fails naming the
// file, the document, the limit and where the count passed it, and the
// process's memory stays under peakBound. Before, render of the policy
// bomb reached 5.3 GB.
func TestRenderRefusesAliasBombs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bombDir := filepath.Join(dir, "bomb")
	if err := os.Mkdir(bombDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, bombDir, "bomb.yaml", policyBomb())
	good := writeFile(t, dir, "good.yaml", fixtures.MustPolicyFile("namespace-noop", fixtures.Params{Name: "good"}))
	triggers := writeFile(t, dir, "triggers.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
	badTriggers := writeFile(t, dir, "bad-triggers.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n"+
		strings.Replace(policyBomb(), "kind: GeneratingPolicy", "kind: Namespace", 1))
	limit := "its aliases expand it to more than 4194304 bytes, the limit; the count passed it at spec.copies[7]"
	for _, tc := range []struct {
		name, policy, triggers, want string
	}{
		{"policy file", bombDir, triggers, "bomb.yaml: document 0: " + limit},
		{"trigger file", good, badTriggers, "bad-triggers.yaml: document 1: " + limit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(sproutBinary(t), "render", "-p", tc.policy, "-r", tc.triggers)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("want render to fail with %q, got %v:\n%.2000s", tc.want, err, out)
			}
			if peak := maxRSS(t, cmd); peak > peakBound {
				t.Errorf("sprout render peaked at %d MiB, more than %d MiB", peak>>20, peakBound>>20)
			} else {
				t.Logf("sprout render peaked at %d MiB", peak>>20)
			}
		})
	}
}

// TestRunRefusesAliasBombs runs the sprout binary against a control plane
// with two attacks at once. A --policy-dir holds the policy bomb: its
// revision is rejected, named on its PolicySource, while the policy of
// another --policy-dir generates. A tenant's NamespacedGeneratingPolicy
// calls yaml.parse on a trigger's 196 KiB of aliases: that trigger fails,
// named on the policy's status, while its other trigger generates. Sprout
// stays up, its peak memory under peakBound. Before, the policy bomb
// killed it at 4.1 GB and the tenant's text at 2.1 GB.
func TestRunRefusesAliasBombs(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	bombDir := t.TempDir()
	writeFile(t, bombDir, "bomb.yaml", policyBomb())
	zk, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	goodDir := policyFolder(t, string(zk))
	p := startProcess(t, writeKubeconfig(t, cp), "--policy-dir", bombDir, "--policy-dir", goodDir, "--default-service-account", "")

	// The policies generate for triggers created once Sprout watches.
	eventually(t, "/readyz", func(ctx context.Context) bool {
		code, _ := p.get(ctx, p.probes(), "/readyz")
		return code == http.StatusOK
	})
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	applyDocs(t, cp, "apiVersion: v1\nkind: Namespace\nmetadata: {name: tenant}\n")
	tenantPolicy := fixtures.MustPolicyFile("derived", fixtures.Params{Name: "parse", Namespace: "tenant", App: "parse", Suffix: "out", Value: "parse", Synchronize: true})
	tenantPolicy = strings.Replace(tenantPolicy, `"policy": "parse"`, `"policy": "parse", "values": string(size(yaml.parse(object.data.value)))`, 1)
	applyDocs(t, cp, tenantPolicy)
	applyScenario(t, cp, "zk-kafka-address", "triggers.yaml")
	trigger := func(name, value string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "tenant", "labels": map[string]any{"app": "parse"}},
			"data":     map[string]any{"value": value},
		}}
		return u
	}
	applyObjects(t, cp.Config, trigger("small", "a: &a [1]\nb: *a\n"), trigger("bomb", tenantBomb()))

	eventually(t, "the good --policy-dir's ConfigMap", func(ctx context.Context) bool {
		_, err := kube.CoreV1().ConfigMaps("team-red").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		return err == nil
	})
	source := sources.ObjectName("dir:" + bombDir)
	want := "bomb.yaml: document 0: its aliases expand it to more than 4194304 bytes, the limit; the count passed it at spec.copies[7]"
	var row map[string]string
	eventually(t, "the rejection on the bomb's PolicySource", func(ctx context.Context) bool {
		row = tableRow(ctx, kube, "/apis/sprout.dev/v1alpha1/policysources/"+source)
		return row["READY"] == "False" && strings.Contains(row["MESSAGE"], want)
	})
	eventually(t, "the small trigger's ConfigMap", func(ctx context.Context) bool {
		cm, err := kube.CoreV1().ConfigMaps("tenant").Get(ctx, "small-out", metav1.GetOptions{})
		return err == nil && cm.Data["values"] == "2"
	})
	policies := dynamic.NewForConfigOrDie(cp.Config).Resource(apiv1.NamespacedGeneratingPolicies).Namespace("tenant")
	wantEval := fmt.Sprintf("trigger ConfigMap tenant/bomb: spec.generate[0].expression: yaml.parse: its aliases expand it to more than %d bytes, the limit", celenv.MaxValueBytes)
	var message string
	eventually(t, "the tenant's error on its policy's status", func(ctx context.Context) bool {
		u, err := policies.Get(ctx, "parse", metav1.GetOptions{})
		if err != nil {
			return false
		}
		conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conditions {
			if c, ok := c.(map[string]any); ok && c["type"] == "Ready" {
				message, _ = c["message"].(string)
			}
		}
		return strings.Contains(message, wantEval)
	})
	if _, err := kube.CoreV1().ConfigMaps("tenant").Get(context.Background(), "bomb-out", metav1.GetOptions{}); err == nil {
		t.Error("the bomb's trigger generated")
	}
	select {
	case err := <-p.done:
		p.done <- err
		t.Fatalf("sprout exited: %v", err)
	default:
	}
	if peak := vmHWM(t, p.cmd.Process.Pid); peak > peakBound {
		t.Errorf("sprout run peaked at %d MiB, more than %d MiB", peak>>20, peakBound>>20)
	} else {
		t.Logf("sprout run peaked at %d MiB", peak>>20)
	}
}

// TestKyvernoTestFileBombIsRefused: `sprout test` of a folder whose
// kyverno-test.yaml is built like the policy bomb reports it as that
// case's error, having allocated little.
func TestKyvernoTestFileBombIsRefused(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "kyverno-test.yaml", "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nmetadata:\n  name: t\n"+
		"x: &big "+strings.Repeat("x", 512<<10)+"\ny: ["+strings.TrimSuffix(strings.Repeat("*big, ", 2000), ", ")+"]\n")
	cmd := exec.Command(sproutBinary(t), "test", dir)
	out, err := cmd.CombinedOutput()
	want := "kyverno-test.yaml: its aliases expand it to more than 4194304 bytes, the limit; the count passed it at y[7]"
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("want sprout test to fail with %q, got %v:\n%.2000s", want, err, out)
	}
	if peak := maxRSS(t, cmd); peak > peakBound {
		t.Errorf("sprout test peaked at %d MiB, more than %d MiB", peak>>20, peakBound>>20)
	}
}
