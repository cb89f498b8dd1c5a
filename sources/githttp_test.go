package sources

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sprout-gitops/sprout/internal/gittest"
)

// writeFile writes content to name in a fresh folder and returns its path.
func writeFile(t *testing.T, dir, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGitOverHTTPWithBasicAuth: a repository served by git http-backend is
// read with the right credentials; wrong ones give a clear error and the
// source keeps its last good revision; the password file is read at every
// check, so fixing it needs no restart.
func TestGitOverHTTPWithBasicAuth(t *testing.T) {
	repo := gittest.NewRepo(t)
	repo.Commit("a policy", map[string]string{"policies/a.yaml": policyNamed("a")})
	srv := gittest.ServeHTTP(t, repo, "sprout", "s3cret")
	dir := t.TempDir()
	passwordFile := writeFile(t, dir, "password", []byte("s3cret\n"))
	ctx := context.Background()

	g, err := NewGit(GitOptions{URL: srv.URL, Branch: "main", Path: "policies", Timeout: 20 * time.Second,
		Auth: FileAuth(srv.URL, AuthFiles{Username: "sprout", PasswordFile: passwordFile})})
	if err != nil {
		t.Fatal(err)
	}
	h := &recorder{}
	g.poll(ctx, h)
	if len(h.failures) != 0 || len(h.upserts) != 1 {
		t.Fatalf("with the right credentials: %+v", h)
	}

	writeFile(t, dir, "password", []byte("rotated"))
	repo.Commit("another", map[string]string{"policies/b.yaml": policyNamed("b")})
	g.poll(ctx, h)
	if len(h.failures) != 1 || !strings.Contains(h.failures[0].Error(), "authentication required") {
		t.Fatalf("wrong credentials: want a clear authentication error, got %v", h.failures)
	}
	if len(h.deletes) != 0 || g.Status().Policies != 1 {
		t.Fatalf("after the credentials went bad: %+v, status %+v", h, g.Status())
	}
	if refused := srv.Refused(); len(refused) == 0 || refused[len(refused)-1] != "sprout:rotated" {
		t.Errorf("the server did not see the rotated password: %v", refused)
	}

	writeFile(t, dir, "password", []byte("s3cret"))
	g.poll(ctx, h)
	if len(h.failures) != 1 || len(h.upserts) != 3 || g.Status().Policies != 2 {
		t.Fatalf("after the password file was fixed: %+v, status %+v", h, g.Status())
	}
}
