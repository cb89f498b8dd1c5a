//go:build demo

package main

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/syncbuf"
)

// TestDemoOnceCleansUp runs the default demo, policies from Git: it prints
// the revision it took and every expected object, nothing for the Namespace
// of no team, stops by itself, logging no error, and leaves nothing behind.
func TestDemoOnceCleansUp(t *testing.T) {
	text := runDemoOnce(t)

	committed := regexp.MustCompile(`(?m)^committed fixtures/gitops to a new Git repository, (\S+) at (main@sha1:[0-9a-f]{40})$`).FindStringSubmatch(text)
	if committed == nil {
		t.Fatalf("the demo did not print the repository it made:\n%s", text)
	}
	if !strings.Contains(text, "\ntook "+committed[2]+" from Git\n") {
		t.Errorf("the demo did not print the revision it took, %s:\n%s", committed[2], text)
	}
	if !strings.Contains(text, "--git-url file://"+committed[1]+" --git-branch main --git-path policies ") {
		t.Errorf("the demo did not print the sprout run flags for its repository:\n%s", text)
	}
	expected, err := fixtures.Objects("gitops", "expected.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range expected {
		labels := e.GetLabels()
		row := `(?m)^created\s+` + strings.Join([]string{e.GetKind(), e.GetNamespace(), e.GetName(), labels[sproutv1alpha1.LabelPolicyName], labels[sproutv1alpha1.LabelTriggerName]}, `\s+`) + `$`
		if !regexp.MustCompile(row).MatchString(text) {
			t.Errorf("the demo did not print %s %s/%s:\n%s", e.GetKind(), e.GetNamespace(), e.GetName(), text)
		}
	}
	if regexp.MustCompile(`(?m)^created\s+\S+\s+sandbox\s`).MatchString(text) {
		t.Errorf("the demo printed an object for sandbox, a Namespace of no team:\n%s", text)
	}
	if _, err := os.Stat(committed[1]); !os.IsNotExist(err) {
		t.Errorf("demo left its Git repository %s behind (stat: %v)", committed[1], err)
	}
}

// TestDemoScenarioFromCluster: a scenario with a policy.yaml runs as before,
// its policy applied to the cluster.
func TestDemoScenarioFromCluster(t *testing.T) {
	text := runDemoOnce(t, "--scenario", "zk-kafka-address")
	if !regexp.MustCompile(`(?m)^created\s+ConfigMap\s+team-red\s+zk-kafka-address\s+zk-kafka-address\s+team-red$`).MatchString(text) {
		t.Errorf("the demo did not print the generated ConfigMap:\n%s", text)
	}
	if strings.Contains(text, "team-blue  ") {
		t.Errorf("the demo printed an object for team-blue:\n%s", text)
	}
	if strings.Contains(text, "Git") {
		t.Errorf("the demo of a cluster policy mentions Git:\n%s", text)
	}
}

// runDemoOnce runs `sprout demo --once` with args, and checks that it
// succeeded and that everything it started is gone: its folder, its API
// server and every process that names its folder (git-upload-pack serving
// the demo's repository). It returns what the demo printed.
func runDemoOnce(t *testing.T, args ...string) string {
	t.Helper()
	var out, logs syncbuf.Buffer
	root := newRootCommand()
	root.SetArgs(append([]string{"demo", "--once", "--timeout", "60s"}, args...))
	root.SetOut(&out)
	root.SetErr(&logs)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	text := out.String()
	// `make run ARGS=--once` used to end with "source revision rejected
	// ... context canceled" at level ERROR: a shutdown is not an error.
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the demo logged an error:\n%s", logs.String())
	}
	if !strings.Contains(text, "\nall expected objects exist\n") {
		t.Errorf("the demo did not say the expected objects exist:\n%s", text)
	}

	kubeconfig := regexp.MustCompile(`KUBECONFIG=(\S+)`).FindStringSubmatch(text)
	host := regexp.MustCompile(`control plane at (\S+);`).FindStringSubmatch(text)
	if kubeconfig == nil || host == nil {
		t.Fatalf("the demo did not print its kubeconfig and host:\n%s", text)
	}
	dir := filepath.Dir(kubeconfig[1])
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("demo left %s behind (stat: %v)", dir, err)
	}
	// Skip verification: a running server must answer (even 401), not fail TLS.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	if resp, err := client.Get(host[1]); err == nil {
		resp.Body.Close()
		t.Errorf("the demo's API server still answers at %s", host[1])
	}
	// A poll of the Git source may still be finishing as the demo returns:
	// give its process a bound to exit, not forever.
	var left []string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		left = processesNaming(t, dir)
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("processes naming %s are still running: %s", dir, strings.Join(left, "; "))
	}
	return text
}

// processesNaming lists the command lines of running processes that
// contain s.
func processesNaming(t *testing.T, s string) []string {
	t.Helper()
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil || len(cmdlines) == 0 {
		t.Fatalf("cannot list processes in /proc: %v", err)
	}
	var out []string
	for _, f := range cmdlines {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // exited meanwhile
		}
		if cmd := strings.ReplaceAll(string(data), "\x00", " "); strings.Contains(cmd, s) {
			out = append(out, cmd)
		}
	}
	return out
}
