package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/fluxtest"
)

// runDiffCommand runs `sprout diff` in-process and returns its output,
// exit status and error.
func runDiffCommand(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	out, _, code, err := diffCmd(args...)
	return out, code, err
}

// TestDiff: `sprout diff` against the live cluster shows nothing for an
// unchanged world (exit 0), a unified diff naming the object and the field
// for a changed policy and the objects a narrower one would prune (exit 1),
// exit 2 for a broken policy, and writes nothing.
func TestDiff(t *testing.T) {
	t.Parallel()
	cp, kube, policy := runZKKafka(t)
	proxy := newAPIProxy(t, cp.Config)
	kubeconfig := proxy.kubeconfig(t)

	if out, code, _ := runDiffCommand(t, "--kubeconfig", kubeconfig); code != 0 || out != "" {
		t.Errorf("the cluster's policies, unchanged: exit %d, output:\n%s", code, out)
	}
	if out, code, _ := runDiffCommand(t, "--kubeconfig", kubeconfig, "--policy-dir", policyFolder(t, policy)); code != 0 || out != "" {
		t.Errorf("the same policy from a folder: exit %d, output:\n%s", code, out)
	}

	changedPolicy := strings.Replace(policy, "192.168.10.10:2181", "10.0.0.1:2181", 1)
	changed := policyFolder(t, changedPolicy)
	out, code, _ := runDiffCommand(t, "--kubeconfig", kubeconfig, "--policy-dir", changed)
	if code != 1 {
		t.Errorf("a changed policy: exit %d, want 1", code)
	}
	for _, want := range []string{
		"# configured ConfigMap/team-red/zk-kafka-address (GeneratingPolicy/zk-kafka-address)",
		"--- live/ConfigMap/team-red/zk-kafka-address",
		"+++ sprout/ConfigMap/team-red/zk-kafka-address",
		"-  ZK_ADDRESS: 192.168.10.10:2181",
		"+  ZK_ADDRESS: 10.0.0.1:2181",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the diff does not contain %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "resourceVersion") || strings.Contains(out, "managedFields") {
		t.Errorf("the diff shows server bookkeeping:\n%s", out)
	}

	narrower := policyFolder(t, strings.Replace(policy, "== 'red'", "== 'green'", 1))
	out, code, _ = runDiffCommand(t, "--kubeconfig", kubeconfig, "--policy-dir", narrower, "-o", "json")
	var listed []plannedObject
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if code != 1 || len(listed) != 1 || listed[0].Action != "deleted" || listed[0].Object != "ConfigMap/team-red/zk-kafka-address" || listed[0].Before == nil {
		t.Errorf("a policy that no longer matches: exit %d, %+v", code, listed)
	}

	broken := policyFolder(t, strings.Replace(policy, "generator.Apply(", "generator.Apply((", 1))
	if out, code, err := runDiffCommand(t, "--kubeconfig", kubeconfig, "--policy-dir", broken); code != 2 || out != "" || err == nil || !strings.Contains(err.Error(), "spec.generate[0].expression") {
		t.Errorf("a broken policy: exit %d (want 2), error %v, output:\n%s", code, err, out)
	}

	// A Flux source, like a folder, plans its own policies, not the
	// cluster's copies that would take precedence.
	fluxtest.InstallCRDs(t, cp.Config)
	artifact := fluxtest.Tarball(t, fluxtest.Entry{Name: "policies/zk.yaml", Body: changedPolicy})
	fluxtest.SetStatus(t, dynamic.NewForConfigOrDie(cp.Config), "GitRepository", "default", "platform", fluxtest.Status{
		Revision: "main@sha1:1", Digest: fluxtest.Digest(artifact), URL: fluxtest.NewServer(t).Publish("/a.tar.gz", artifact), Ready: metav1.ConditionTrue,
	})
	if out, code, err := runDiffCommand(t, "--kubeconfig", kubeconfig, "--source-ref", "GitRepository/default/platform", "--source-path", "policies"); code != 1 || !strings.Contains(out, "+  ZK_ADDRESS: 10.0.0.1:2181") {
		t.Errorf("the changed policy from a Flux source: exit %d, error %v, output:\n%s", code, err, out)
	}

	// A Secret's values never show: created, the diff masks them.
	secretPolicy := fixtures.MustPolicyFile("secret", fixtures.Params{Name: "secret-maker", Color: "red", Synchronize: true, GenerateExisting: true})
	out, code, _ = runDiffCommand(t, "--kubeconfig", kubeconfig, "--policy-dir", policyFolder(t, secretPolicy))
	if code != 1 || !strings.Contains(out, "# created Secret/team-red/creds") || !strings.Contains(out, "+  password: '***'") || strings.Contains(out, "hunter2") {
		t.Errorf("a new Secret: exit %d, output:\n%s", code, out)
	}

	if n := proxy.writes.Load(); n != 0 {
		t.Errorf("sprout diff wrote %d times: %v", n, proxy.written())
	}
	if _, err := kube.CoreV1().ConfigMaps("team-red").Get(context.Background(), "zk-kafka-address", metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap after the diffs: %v", err)
	}
}

// unreachableKubeconfig writes a kubeconfig for a server at addr.
func unreachableKubeconfig(t *testing.T, addr string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	doc := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://` + addr + `"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// silentServer returns the address of a server that accepts connections
// and never answers.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { conn.Close() })
		}
	}()
	return ln.Addr().String()
}

// TestDiffGivesUpOnAnUnreachableServer: `sprout diff` against a server that
// refuses connections fails at once naming it, and against one that
// accepts connections but never answers, it fails once --request-timeout
// has passed, as kubectl does, instead of waiting for ever.
func TestDiffGivesUpOnAnUnreachableServer(t *testing.T) {
	policy, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := policyFolder(t, string(policy))
	// A port nobody listens on: taken, then freed.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()
	silent := silentServer(t)

	for _, c := range []struct {
		addr string
		args []string
		want string
	}{
		{refused, nil, "connection refused"},
		{silent, []string{"--request-timeout", "500ms"}, "exceeded"}, // the client's timeout, or the request's deadline
	} {
		done := make(chan error, 1)
		go func() {
			args := append([]string{"--kubeconfig", unreachableKubeconfig(t, c.addr), "--policy-dir", dir}, c.args...)
			_, _, err := runDiffCommand(t, args...)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.addr) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("sprout diff against %s: %v, want an error naming it and %q", c.addr, err, c.want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("sprout diff against %s %v still waits after 30 s", c.addr, c.args)
		}
	}
}
