package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/sprout-gitops/sprout/fixtures"
)

// TestRunFollowsAGitRepository: sprout run --git-url runs the policies of a
// real repository (file://) and follows commits that add, change and remove
// a policy, within the poll interval.
func TestRunFollowsAGitRepository(t *testing.T) {
	dir := t.TempDir()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")}})
	if err != nil {
		t.Fatal(err)
	}
	commit := func(files map[string]string) {
		t.Helper()
		wt, err := repo.Worktree()
		if err != nil {
			t.Fatal(err)
		}
		for name, content := range files {
			if content == "" {
				if _, err := wt.Remove(name); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := wt.Add(name); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := wt.Commit("change", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}}); err != nil {
			t.Fatal(err)
		}
	}
	policy, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The folder stays when its last policy goes (a missing --git-path is an
	// error, never "delete everything"): it holds a README too.
	commit(map[string]string{"policies/zk.yaml": string(policy), "policies/README.md": "policies", "README.md": "platform repo"})

	cp := startRun(t, "--cluster-policies=false",
		"--git-url", "file://"+dir, "--git-branch", "main", "--git-path", "policies", "--poll-interval", "200ms")

	kube := kubernetes.NewForConfigOrDie(cp.Config)
	cm := func(ctx context.Context) (*corev1.ConfigMap, error) {
		c, err := kube.CoreV1().ConfigMaps("git-red").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return c, err
	}
	waitFor := func(what string, cond func(*corev1.ConfigMap) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			c, err := cm(ctx)
			return err == nil && cond(c), err
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	// The policy is active from when Sprout first loads it: wait for its record.
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		raw, err := kube.Discovery().RESTClient().Get().AbsPath("/apis/sprout.dev/v1alpha1/policyinventories/gpol.zk-kafka-address").DoRaw(ctx)
		return err == nil && strings.Contains(string(raw), "git:file://"), nil
	})
	if err != nil {
		t.Fatalf("waiting for the policy from Git: %v", err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "git-red", Labels: map[string]string{"color": "red"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the ConfigMap of the policy from Git", func(c *corev1.ConfigMap) bool { return c != nil })

	commit(map[string]string{"policies/zk.yaml": strings.Replace(string(policy), "192.168.10.10:2181", "10.0.0.1:2181", 1)})
	waitFor("the commit that changes the data", func(c *corev1.ConfigMap) bool {
		return c != nil && strings.HasPrefix(c.Data["ZK_ADDRESS"], "10.0.0.1:2181")
	})

	commit(map[string]string{"policies/zk.yaml": ""})
	waitFor("the commit that removes the policy to prune its object", func(c *corev1.ConfigMap) bool { return c == nil })
}
