package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/gittest"
	"github.com/sprout-gitops/sprout/sources"
)

// TestRunFollowsAGitRepository: sprout run --git-url runs the policies of a
// real repository (file://) and follows commits that add, change and remove
// a policy, within the poll interval.
func TestRunFollowsAGitRepository(t *testing.T) {
	t.Parallel()
	repo := gittest.NewRepo(t)
	policy, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The folder stays when its last policy goes (a missing --git-path is an
	// error, never "delete everything"): it holds a README too.
	repo.Commit("change", map[string]string{"policies/zk.yaml": string(policy), "policies/README.md": "policies", "README.md": "platform repo"})

	cp := startRun(t, "--cluster-policies=false",
		"--git-url", repo.URL(), "--git-branch", "main", "--git-path", "policies", "--poll-interval", "200ms")

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

	repo.Commit("change", map[string]string{"policies/zk.yaml": strings.Replace(string(policy), "192.168.10.10:2181", "10.0.0.1:2181", 1)})
	waitFor("the commit that changes the data", func(c *corev1.ConfigMap) bool {
		return c != nil && strings.HasPrefix(c.Data["ZK_ADDRESS"], "10.0.0.1:2181")
	})

	repo.Commit("change", map[string]string{"policies/zk.yaml": ""})
	waitFor("the commit that removes the policy to prune its object", func(c *corev1.ConfigMap) bool { return c == nil })
}

// TestRunReadsGitCredentialsFromASecret: --git-secret-ref reads the Secret at
// every check: with a wrong password the server refuses the fetch and no
// policy runs; once the Secret is fixed, the policy runs without a restart.
func TestRunReadsGitCredentialsFromASecret(t *testing.T) {
	t.Parallel()
	repo := gittest.NewRepo(t)
	policy, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	repo.Commit("a policy", map[string]string{"policies/zk.yaml": string(policy)})
	srv := gittest.ServeHTTP(t, repo, "sprout", "s3cret")

	cp := startRun(t, "--cluster-policies=false", "--git-url", srv.URL, "--git-path", "policies",
		"--git-secret-ref", "sprout-system/git-credentials", "--poll-interval", "200ms")
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sprout-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sprout-system", Name: "git-credentials"},
		StringData: map[string]string{"username": "sprout", "password": "wrong"},
	}
	if secret, err = kube.CoreV1().Secrets("sprout-system").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return slices.Contains(srv.Refused(), "sprout:wrong"), nil
	})
	if err != nil {
		t.Fatalf("waiting for a fetch with the Secret's wrong password: %v (refused: %v)", err, srv.Refused())
	}
	record := func(ctx context.Context) (string, error) {
		raw, err := kube.Discovery().RESTClient().Get().AbsPath("/apis/sprout.dev/v1alpha1/policyinventories/gpol.zk-kafka-address").DoRaw(ctx)
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return string(raw), err
	}
	if raw, err := record(ctx); err != nil || raw != "" {
		t.Fatalf("a policy runs although its fetch was refused: %q, %v", raw, err)
	}

	secret.Data = map[string][]byte{"username": []byte("sprout"), "password": []byte("s3cret")}
	if _, err := kube.CoreV1().Secrets("sprout-system").Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		raw, err := record(ctx)
		return strings.Contains(raw, "git:"+srv.URL), err
	})
	if err != nil {
		t.Fatalf("waiting for the policy once the Secret is fixed: %v", err)
	}
}

// TestGitCredentialFlags: credentials flags that do not fit the URL, or each
// other, stop start-up with a message naming the flag.
func TestGitCredentialFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const (
		https = "https://git.example.com/org/repo"
		ssh   = "ssh://git@git.example.com/org/repo"
		scp   = "git@git.example.com:org/repo.git"
	)
	tests := []struct {
		name      string
		url       string
		files     sources.AuthFiles
		secretRef string
		wantErr   string // "" for accepted
	}{
		{name: "no credentials over HTTPS", url: https},
		{name: "a password file", url: https, files: sources.AuthFiles{PasswordFile: file}},
		{name: "a missing password file", url: https, files: sources.AuthFiles{PasswordFile: filepath.Join(dir, "nope")}, wantErr: "nope: no such file"},
		{name: "a password and a token", url: https, files: sources.AuthFiles{PasswordFile: file, TokenFile: file}, wantErr: "--git-password-file and --git-token-file: give one"},
		{name: "an SSH key over HTTPS", url: https, files: sources.AuthFiles{SSHKeyFile: file}, wantErr: "--git-ssh-key-file is for SSH URLs"},
		{name: "ssh:// without known_hosts", url: ssh, files: sources.AuthFiles{SSHKeyFile: file}, wantErr: "an SSH URL needs --git-known-hosts-file"},
		{name: "scp-like without known_hosts", url: scp, wantErr: "an SSH URL needs --git-known-hosts-file"},
		{name: "ssh:// without a key", url: ssh, files: sources.AuthFiles{KnownHostsFile: file}, wantErr: "an SSH URL needs --git-ssh-key-file"},
		{name: "a token over SSH", url: ssh, files: sources.AuthFiles{TokenFile: file}, wantErr: "--git-token-file is for HTTPS URLs"},
		{name: "a Secret", url: ssh, secretRef: "sprout-system/git"},
		{name: "a Secret and files", url: https, secretRef: "sprout-system/git", files: sources.AuthFiles{TokenFile: file}, wantErr: "--git-secret-ref and --git-token-file"},
		{name: "a Secret without a namespace", url: https, secretRef: "git", wantErr: `--git-secret-ref "git": want <namespace>/<name>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro := &sourceFlags{git: sources.GitOptions{URL: tt.url}, gitFiles: tt.files, gitSecretRef: tt.secretRef}
			_, err := ro.gitAuth(context.Background(), &rest.Config{Host: "https://127.0.0.1:1"})
			if tt.wantErr == "" && err != nil {
				t.Errorf("refused: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}
