package sources

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sprout-gitops/sprout/internal/gittest"
)

// TestGitOverHTTPWithBasicAuth: a repository served by git http-backend is
// read with the right credentials; wrong ones give a clear error and the
// source keeps its last good revision.
func TestGitOverHTTPWithBasicAuth(t *testing.T) {
	repo := gittest.NewRepo(t)
	repo.Commit("a policy", map[string]string{"policies/a.yaml": policyNamed("a")})
	url := gittest.ServeHTTP(t, repo, "sprout", "s3cret").URL
	ctx := context.Background()

	good, err := NewGit(GitOptions{URL: url, Branch: "main", Path: "policies", Auth: BasicAuth("sprout", "s3cret"), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := &recorder{}
	good.poll(ctx, h)
	if len(h.failures) != 0 || len(h.upserts) != 1 {
		t.Fatalf("with the right credentials: %+v", h)
	}

	wrong, err := NewGit(GitOptions{URL: url, Branch: "main", Auth: BasicAuth("sprout", "wrong"), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h2 := &recorder{}
	wrong.poll(ctx, h2)
	if len(h2.failures) != 1 || !strings.Contains(h2.failures[0].Error(), "authentication required") {
		t.Fatalf("wrong credentials: want a clear authentication error, got %v", h2.failures)
	}

	// A source whose credentials go bad keeps its last good revision.
	good.opts.Auth = BasicAuth("sprout", "rotated")
	repo.Commit("another", map[string]string{"policies/b.yaml": policyNamed("b")})
	good.poll(ctx, h)
	if len(h.failures) != 1 || len(h.deletes) != 0 || good.Status().Policies != 1 {
		t.Fatalf("after the credentials went bad: %+v, status %+v", h, good.Status())
	}
}
