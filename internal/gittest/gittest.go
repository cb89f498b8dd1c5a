// Package gittest gives tests real Git repositories: made with go-git in a
// temporary folder, read over file:// or over smart HTTP (git's own
// http-backend) on 127.0.0.1. The tests of sources and of `sprout run` share
// it; nothing else imports it.
package gittest

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Repo is a Git repository in a temporary folder, with main as its default
// branch.
type Repo struct {
	// Dir is the repository's working tree.
	Dir  string
	t    testing.TB
	repo *git.Repository
}

// NewRepo makes an empty repository, removed when the test ends.
func NewRepo(t testing.TB) *Repo {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &Repo{Dir: dir, t: t, repo: repo}
}

// URL reaches the repository over file://.
func (r *Repo) URL() string { return "file://" + r.Dir }

// Commit writes files (empty content deletes one) and commits them on the
// current branch.
func (r *Repo) Commit(msg string, files map[string]string) plumbing.Hash {
	r.t.Helper()
	return r.commit(msg, func(wt *git.Worktree) {
		for name, content := range files {
			if content == "" {
				if _, err := wt.Remove(name); err != nil {
					r.t.Fatal(err)
				}
				continue
			}
			r.add(wt, name, func(p string) error { return os.WriteFile(p, []byte(content), 0o644) })
		}
	})
}

// CommitLink commits a symbolic link at name to target (relative or
// absolute, it need not exist) on the current branch.
func (r *Repo) CommitLink(msg, name, target string) plumbing.Hash {
	r.t.Helper()
	return r.commit(msg, func(wt *git.Worktree) {
		r.add(wt, name, func(p string) error { return os.Symlink(target, p) })
	})
}

// commit commits on the current branch what change stages.
func (r *Repo) commit(msg string, change func(*git.Worktree)) plumbing.Hash {
	r.t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	change(wt)
	h, err := wt.Commit(msg, &git.CommitOptions{Author: signature()})
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

// add makes the file name with write, which is given its path, and stages
// it.
func (r *Repo) add(wt *git.Worktree, name string, write func(path string) error) {
	r.t.Helper()
	p := filepath.Join(r.Dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := write(p); err != nil {
		r.t.Fatal(err)
	}
	if _, err := wt.Add(name); err != nil {
		r.t.Fatal(err)
	}
}

// Tag tags h with an annotated tag.
func (r *Repo) Tag(name string, h plumbing.Hash) {
	r.t.Helper()
	if _, err := r.repo.CreateTag(name, h, &git.CreateTagOptions{Message: name, Tagger: signature()}); err != nil {
		r.t.Fatal(err)
	}
}

// LightweightTag tags h with a lightweight tag: a bare ref, nothing to peel.
func (r *Repo) LightweightTag(name string, h plumbing.Hash) {
	r.t.Helper()
	if _, err := r.repo.CreateTag(name, h, nil); err != nil {
		r.t.Fatal(err)
	}
}

// Branch creates branch name at h and checks it out, so that the next
// commits land on it.
func (r *Repo) Branch(name string, h plumbing.Hash) {
	r.t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(name), Hash: h, Create: true}); err != nil {
		r.t.Fatal(err)
	}
}

func signature() *object.Signature {
	return &object.Signature{Name: "test", Email: "test@example.com", When: time.Now()}
}

// HTTPServer serves a Repo over smart HTTP behind basic auth.
type HTTPServer struct {
	// URL is the repository's URL.
	URL string

	mu      sync.Mutex
	refused []string
	mangle  func(body []byte) []byte
}

// ServeHTTP serves repo with git http-backend (a CGI program) on 127.0.0.1,
// to the one user with password; stopped when the test ends.
func ServeHTTP(t testing.TB, repo *Repo, user, password string) *HTTPServer {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + filepath.Dir(repo.Dir), "GIT_HTTP_EXPORT_ALL=1"},
	}
	s := &HTTPServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != password {
			s.mu.Lock()
			s.refused = append(s.refused, u+":"+p)
			s.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		s.mu.Lock()
		mangle := s.mangle
		s.mu.Unlock()
		if mangle == nil || !strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			backend.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		backend.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(mangle(rec.Body.Bytes())) //nolint:errcheck // the client sees a short answer
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/" + filepath.Base(repo.Dir)
	return s
}

// MangleUploadPack passes the body of every git-upload-pack answer, the
// pkt-lines that carry the pack, through mangle before it is sent, as a
// broken proxy or disk would; nil serves answers unchanged again.
func (s *HTTPServer) MangleUploadPack(mangle func(body []byte) []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mangle = mangle
}

// Refused returns the "user:password" of every request refused so far
// (":" for one without credentials).
func (s *HTTPServer) Refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refused...)
}
