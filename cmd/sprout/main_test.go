package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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

	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/internal/syncbuf"
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
	for _, want := range []string{"--kubeconfig", "--context", "--workers", "--log-level", "--log-format", "--policy-dir", "--poll-interval", "--cluster-policies", "--resync-schedule", "--git-url", "--git-branch", "--git-tag", "--git-semver", "--git-commit", "--git-path", "--metrics-bind-address", "--pprof-bind-address", "--adaptive-procs",
		"--git-timeout", "--git-username", "--git-password-file", "--git-token-file", "--git-ssh-key-file", "--git-ssh-key-password-file",
		"--git-known-hosts-file", "--git-secret-ref"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sprout run --help does not mention %s:\n%s", want, out.String())
		}
	}
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
		// Tests run side by side: never the default port, and GOMAXPROCS,
		// which is the whole test process's, left to the runtime.
		root.SetArgs(append([]string{"run", "--kubeconfig", kubeconfig, "--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--adaptive-procs=false"}, args...))
		root.SetErr(&syncbuf.Buffer{})
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
	t.Parallel()
	cp := startRun(t, "--log-format", "json")

	applyScenario(t, cp, "zk-kafka-address", "policy.yaml", "triggers.yaml")
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
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
