package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/inventory"
)

func TestHelpDescribesEveryFlag(t *testing.T) {
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if cmd.Short == "" {
			t.Errorf("%q has no description", cmd.CommandPath())
		}
		check := func(f *pflag.Flag) {
			if strings.TrimSpace(f.Usage) == "" {
				t.Errorf("%s --%s has no description", cmd.CommandPath(), f.Name)
			}
		}
		cmd.LocalFlags().VisitAll(check)
		cmd.InheritedFlags().VisitAll(check)
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	root := newRootCommand()
	root.InitDefaultHelpCmd()
	walk(root)

	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"run", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--kubeconfig", "--context", "--workers", "--log-level", "--log-format", "--policy-dir", "--poll-interval", "--cluster-policies", "--resync-schedule", "--git-url", "--git-branch", "--git-tag", "--git-semver", "--git-commit", "--git-path", "--metrics-bind-address", "--pprof-bind-address",
		"--git-timeout", "--git-username", "--git-password-file", "--git-token-file", "--git-ssh-key-file", "--git-ssh-key-password-file",
		"--git-known-hosts-file", "--git-secret-ref"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sprout run --help does not mention %s:\n%s", want, out.String())
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startRun starts a control plane for the test and `sprout run` against it
// with its kubeconfig and args, both stopped when the test ends.
func startRun(t *testing.T, args ...string) *controlplane.ControlPlane {
	t.Helper()
	cp := startControlPlane(t)
	runSprout(t, writeKubeconfig(t, cp), args...)
	return cp
}

// writeKubeconfig writes a kubeconfig of cp to a file, for --kubeconfig.
func writeKubeconfig(t *testing.T, cp *controlplane.ControlPlane) string {
	t.Helper()
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runSprout runs `sprout run` in-process against the cluster of kubeconfig
// with args. It returns a function that stops it and waits until it has
// returned, for a test that changes the cluster behind Sprout's back; the
// end of the test calls it too.
func runSprout(t *testing.T, kubeconfig string, args ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		root := newRootCommand()
		// Tests run side by side: never the default port.
		root.SetArgs(append([]string{"run", "--kubeconfig", kubeconfig, "--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, args...))
		root.SetErr(&syncBuffer{})
		done <- root.ExecuteContext(ctx)
	}()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sprout run: %v", err)
		}
	})
	t.Cleanup(stop)
	return stop
}

func TestRunWatchesTheClusterOfItsKubeconfig(t *testing.T) {
	cp := startRun(t, "--log-format", "json")

	a, err := manifest.NewApplier(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"policy.yaml", "triggers.yaml"} {
		objs, err := fixtures.Objects("zk-kafka-address", file)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Apply(context.Background(), objs...); err != nil {
			t.Fatal(err)
		}
	}
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ConfigMaps("team-red").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("waiting for the generated ConfigMap: %v", err)
	}
}

// TestDemoOnceCleansUp runs the default demo, policies from Git: it prints
// the revision it took and every expected object, nothing for the Namespace
// of no team, stops by itself and leaves nothing behind.
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
		row := `(?m)^created\s+` + strings.Join([]string{e.GetKind(), e.GetNamespace(), e.GetName(), labels[inventory.LabelPolicyName], labels[inventory.LabelTriggerName]}, `\s+`) + `$`
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
	var out syncBuffer
	root := newRootCommand()
	root.SetArgs(append([]string{"demo", "--once", "--timeout", "60s"}, args...))
	root.SetOut(&out)
	root.SetErr(&syncBuffer{})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	text := out.String()
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
