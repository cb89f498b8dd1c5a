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

func sproutGitDirs(t *testing.T) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(os.TempDir(), "sprout-git-*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func TestGitFetch(t *testing.T) {
	repo := gittest.NewRepo(t)
	first := repo.Commit("one policy", map[string]string{
		"README.md":        "not read",
		"policies/a.yaml":  policyNamed("a"),
		"elsewhere/x.yaml": "not: [read",
	})
	g, err := NewGit(GitOptions{URL: repo.URL(), Branch: "main", Path: "policies"})
	if err != nil {
		t.Fatal(err)
	}
	before := sproutGitDirs(t)
	ctx := context.Background()

	policies, rev, unchanged, err := g.fetch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if unchanged || len(policies) != 1 || policies[0].GetName() != "a" || rev != "main@sha1:"+first.String() {
		t.Fatalf("fetch: %d policies, revision %q, unchanged %v", len(policies), rev, unchanged)
	}
	if _, _, unchanged, err := g.fetch(ctx, rev); err != nil || !unchanged {
		t.Fatalf("an unmoved ref must not be fetched again: unchanged %v, %v", unchanged, err)
	}

	repo.Commit("a broken one", map[string]string{"policies/b.yaml": strings.Replace(policyNamed("b"), "generator.Apply(", "generator.Apply((", 1)})
	if _, _, _, err := g.fetch(ctx, rev); err == nil || !strings.Contains(err.Error(), "policies/b.yaml") || !strings.Contains(err.Error(), "spec.generate[0].expression") {
		t.Fatalf("a broken revision must be rejected naming file and field: %v", err)
	}

	fixed := repo.Commit("fixed", map[string]string{"policies/b.yaml": policyNamed("b")})
	repo.Tag("v1.0.0", fixed)
	policies, rev, _, err = g.fetch(ctx, rev)
	if err != nil || len(policies) != 2 {
		t.Fatalf("the fixed revision: %d policies, %v", len(policies), err)
	}

	tagged, err := NewGit(GitOptions{URL: repo.URL(), Tag: "v1.0.0", Path: "/policies/"})
	if err != nil {
		t.Fatal(err)
	}
	repo.Commit("after the tag", map[string]string{"policies/a.yaml": ""})
	policies, rev, _, err = tagged.fetch(ctx, "")
	if err != nil || len(policies) != 2 || rev != "v1.0.0@sha1:"+fixed.String() {
		t.Fatalf("the tag: %d policies, revision %q, %v", len(policies), rev, err)
	}
	if after := sproutGitDirs(t); after != before {
		t.Errorf("fetches left %d working trees behind", after-before)
	}

	missing, _ := NewGit(GitOptions{URL: repo.URL(), Branch: "nope"})
	if _, _, _, err := missing.fetch(ctx, ""); err == nil || !strings.Contains(err.Error(), "refs/heads/nope") {
		t.Errorf("a missing branch: %v", err)
	}
	unreachable, _ := NewGit(GitOptions{URL: "file:///nonexistent/repo", Timeout: 5 * time.Second})
	if _, _, _, err := unreachable.fetch(ctx, ""); err == nil {
		t.Error("an unreachable remote gave no error")
	}
}

// recorder is a Handler that records what a source hands over.
type recorder struct {
	upserts, deletes []string
	failures         []error
	complete         int
}

func (r *recorder) Upsert(p Policy)                  { r.upserts = append(r.upserts, p.GetName()+"@"+p.Revision) }
func (r *recorder) Delete(p Policy)                  { r.deletes = append(r.deletes, p.GetName()) }
func (r *recorder) Invalid(string, string, error)    {}
func (r *recorder) SourceFailed(_ string, err error) { r.failures = append(r.failures, err) }
func (r *recorder) SourceComplete(string)            { r.complete++ }

// TestUnreachableRemoteDeletesNothing: while the remote is gone, errors are
// reported and nothing is deleted; when it returns, work resumes.
func TestUnreachableRemoteDeletesNothing(t *testing.T) {
	repo := gittest.NewRepo(t)
	repo.Commit("two policies", map[string]string{"a.yaml": policyNamed("a"), "b.yaml": policyNamed("b")})
	g, err := NewGit(GitOptions{URL: repo.URL(), Branch: "main", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := &recorder{}
	ctx := context.Background()
	g.poll(ctx, h)
	if len(h.upserts) != 2 || h.complete != 1 || len(h.failures) != 0 {
		t.Fatalf("first poll: %+v", h)
	}

	away := repo.Dir + ".away"
	if err := os.Rename(repo.Dir, away); err != nil {
		t.Fatal(err)
	}
	g.poll(ctx, h)
	g.poll(ctx, h)
	if len(h.failures) != 2 || len(h.deletes) != 0 {
		t.Fatalf("while unreachable: %d failures, deletes %v", len(h.failures), h.deletes)
	}
	if st := g.Status(); st.Err == nil || st.Policies != 2 {
		t.Errorf("status while unreachable: %+v", st)
	}

	if err := os.Rename(away, repo.Dir); err != nil {
		t.Fatal(err)
	}
	repo.Commit("one removed", map[string]string{"b.yaml": ""})
	g.poll(ctx, h)
	if st := g.Status(); st.Err != nil || st.Policies != 1 {
		t.Errorf("status after recovery: %+v", st)
	}
	if len(h.deletes) != 1 || h.deletes[0] != "b" {
		t.Errorf("after recovery, deletes %v, want [b]", h.deletes)
	}
}
