package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/sources"
)

// freeAddress returns a loopback address no one listens on now, for a
// kubeconfig that must not reach a server. A process that serves is given
// port 0 instead and says where it listens: a port picked and closed here
// may be taken by another test before the process binds it.
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// gitCommit commits the files (empty content removes one) with the git
// binary, as a user would.
func gitCommit(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if content == "" {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "change"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// TestGitSourceStatusAndMetrics: a Git source's revision, policy count and
// last error show in `kubectl get psrc` and in /metrics; a commit with one
// broken policy is rejected whole and a fixed commit is taken.
func TestGitSourceStatusAndMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", "-b", "main", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	policy, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gitCommit(t, dir, map[string]string{"policies/zk.yaml": string(policy)})

	url := "file://" + dir
	cp := startControlPlane(t)
	p := startProcess(t, writeKubeconfig(t, cp), "--cluster-policies=false", "--git-url", url, "--git-branch", "main",
		"--git-path", "policies", "--poll-interval", "200ms")
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	source := sources.ObjectName("git:" + url)

	// kubectlGet returns the row `kubectl get psrc -o wide` prints, column by column.
	kubectlGet := func(ctx context.Context) map[string]string {
		return tableRow(ctx, kube, "/apis/sprout.dev/v1alpha1/policysources/"+source)
	}
	scrape := func(ctx context.Context) string {
		_, body := p.get(ctx, p.metric(), "/metrics")
		return body
	}
	waitUntil := func(what string, cond func(ctx context.Context) bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			return cond(ctx), nil
		}); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	sourceLabel := `source="git:` + url + `"`

	waitUntil("the first revision in kubectl get psrc", func(ctx context.Context) bool {
		row := kubectlGet(ctx)
		return row["TYPE"] == "git" && row["URL"] == url && strings.HasPrefix(row["REVISION"], "main@sha1:") && row["POLICIES"] == "1" && row["READY"] == "True"
	})
	first := kubectlGet(context.Background())["REVISION"]
	waitUntil("the source series in /metrics", func(ctx context.Context) bool {
		m := scrape(ctx)
		return strings.Contains(m, "sprout_source_ready{"+sourceLabel+"} 1") &&
			strings.Contains(m, "sprout_source_policies{"+sourceLabel+"} 1") &&
			strings.Contains(m, `sprout_source_revision_info{revision="main@sha1:`)
	})

	gitCommit(t, dir, map[string]string{"policies/broken.yaml": "apiVersion: policies.kyverno.io/v1\nkind: GeneratingPolicy\nmetadata:\n  name: broken\nspec:\n  generate:\n  - expression: 'true'\n"})
	waitUntil("the rejection in kubectl get psrc", func(ctx context.Context) bool {
		row := kubectlGet(ctx)
		return row["READY"] == "False" && row["POLICIES"] == "1" && strings.Contains(row["MESSAGE"], "policies/broken.yaml") && strings.Contains(row["MESSAGE"], "spec.matchConstraints")
	})
	waitUntil("the rejection in /metrics", func(ctx context.Context) bool {
		m := scrape(ctx)
		return strings.Contains(m, "sprout_source_ready{"+sourceLabel+"} 0") && strings.Contains(m, `sprout_source_checks_total{result="failed",`+sourceLabel+"}")
	})
	waitUntil("the RevisionTaken and RevisionRejected events on the source", func(ctx context.Context) bool {
		events, err := kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + source})
		if err != nil {
			return false
		}
		reasons := map[string]bool{}
		for _, e := range events.Items {
			reasons[e.Reason] = true
		}
		return reasons["RevisionTaken"] && reasons["RevisionRejected"]
	})

	gitCommit(t, dir, map[string]string{"policies/broken.yaml": ""})
	waitUntil("the fixed revision", func(ctx context.Context) bool {
		row := kubectlGet(ctx)
		return row["READY"] == "True" && row["REVISION"] != first
	})
}
