package sources

import (
	"context"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveHTTP serves repo.dir over smart HTTP with git's own http-backend (a
// CGI program), on 127.0.0.1, behind basic auth.
func serveHTTP(t *testing.T, repo *testRepo, user, password string) string {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + filepath.Dir(repo.dir), "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(repo.dir)
}

// TestGitOverHTTPWithBasicAuth: a repository served by git http-backend is
// read with the right credentials; wrong ones give a clear error and the
// source keeps its last good revision.
func TestGitOverHTTPWithBasicAuth(t *testing.T) {
	repo := newTestRepo(t)
	repo.commit("a policy", map[string]string{"policies/a.yaml": policyNamed("a")})
	url := serveHTTP(t, repo, "sprout", "s3cret")
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
	repo.commit("another", map[string]string{"policies/b.yaml": policyNamed("b")})
	good.poll(ctx, h)
	if len(h.failures) != 1 || len(h.deletes) != 0 || good.Status().Policies != 1 {
		t.Fatalf("after the credentials went bad: %+v, status %+v", h, good.Status())
	}
}
