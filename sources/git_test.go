package sources

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/sprout-gitops/sprout/internal/gittest"
)

// sproutGitDirs counts the Git sources' temporary folders. Tests that
// count set TMPDIR to a folder of their own first, so that other processes'
// folders do not count.
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
	t.Setenv("TMPDIR", t.TempDir()) // counted alone, whatever else runs
	before := sproutGitDirs(t)
	ctx := context.Background()

	got, rev, unchanged, err := g.fetch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if unchanged || len(got.policies) != 1 || got.policies[0].GetName() != "a" || rev != "main@sha1:"+first.String() {
		t.Fatalf("fetch: %d policies, revision %q, unchanged %v", len(got.policies), rev, unchanged)
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
	got, _, _, err = g.fetch(ctx, rev)
	if err != nil || len(got.policies) != 2 {
		t.Fatalf("the fixed revision: %d policies, %v", len(got.policies), err)
	}

	tagged, err := NewGit(GitOptions{URL: repo.URL(), Tag: "v1.0.0", Path: "/policies/"})
	if err != nil {
		t.Fatal(err)
	}
	repo.Commit("after the tag", map[string]string{"policies/a.yaml": ""})
	got, rev, _, err = tagged.fetch(ctx, "")
	if err != nil || len(got.policies) != 2 || rev != "v1.0.0@sha1:"+fixed.String() {
		t.Fatalf("the tag: %d policies, revision %q, %v", len(got.policies), rev, err)
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

func TestNewGitRejects(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name    string
		opts    GitOptions
		wantErr string
	}{
		{"no URL", GitOptions{}, "a URL is required"},
		{"a branch and a tag", GitOptions{URL: "file:///r", Branch: "main", Tag: "v1"}, "one of a branch, a tag or a semver range"},
		{"a tag and a range", GitOptions{URL: "file:///r", Tag: "v1", SemVer: "1.x"}, "one of a branch, a tag or a semver range"},
		{"a bad range", GitOptions{URL: "file:///r", SemVer: "one point oh"}, `semver range "one point oh"`},
		{"a commit and a tag", GitOptions{URL: "file:///r", Tag: "v1", Commit: sha}, "alone or on a branch"},
		{"a commit and a range", GitOptions{URL: "file:///r", SemVer: "1.x", Commit: sha}, "alone or on a branch"},
		{"a short commit", GitOptions{URL: "file:///r", Commit: sha[:7]}, "full 40-character SHA-1"},
		{"ssh:// without credentials", GitOptions{URL: "ssh://git@example.com/r.git"}, "an SSH URL needs credentials"},
		{"scp-like without credentials", GitOptions{URL: "git@example.com:org/r.git"}, "an SSH URL needs credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewGit(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
	if _, err := NewGit(GitOptions{URL: "file:///r", Branch: "main", Commit: sha}); err != nil {
		t.Errorf("a commit on a branch: %v", err)
	}
}

func TestHighestTag(t *testing.T) {
	tests := []struct {
		name string
		tags []string
		rng  string
		want string // "" for none
	}{
		{"highest in range", []string{"v1.0.0", "v1.2.0", "v1.10.0", "v2.0.0"}, ">=1.0.0 <2.0.0", "v1.10.0"},
		{"v prefix optional", []string{"v1.0.0", "1.1.0"}, "1.x", "1.1.0"},
		{"non-versions ignored", []string{"latest", "release-9", "v1.0.0", "stable"}, "*", "v1.0.0"},
		{"pre-releases only when asked", []string{"v1.0.0", "v1.1.0-rc.1"}, "1.x", "v1.0.0"},
		{"pre-release asked for", []string{"v1.0.0", "v1.1.0-rc.1"}, ">=1.1.0-rc.0", "v1.1.0-rc.1"},
		{"peeled entries skipped", []string{"v1.0.0", "v1.0.0^{}"}, "1.x", "v1.0.0"},
		{"a tie goes to the greater name", []string{"v1.0.0", "1.0.0"}, "1.x", "v1.0.0"},
		{"nothing in range", []string{"v1.0.0", "v2.0.0"}, ">=3", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var refs []*plumbing.Reference
			refs = append(refs, plumbing.NewHashReference(plumbing.NewBranchReferenceName("v9.0.0"), plumbing.ZeroHash)) // a branch, not a tag
			for _, name := range tt.tags {
				refs = append(refs, plumbing.NewHashReference(plumbing.NewTagReferenceName(name), plumbing.ZeroHash))
			}
			c, err := semver.NewConstraint(tt.rng)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := highestTag(refs, c)
			if tt.want == "" {
				if ok {
					t.Errorf("got %s, want none", got)
				}
				return
			}
			if !ok || got.Short() != tt.want {
				t.Errorf("got %q (%v), want %q", got.Short(), ok, tt.want)
			}
		})
	}
}

// TestGitSemVer: a range follows the highest matching tag of the remote,
// moves when a higher one is pushed, and fails clearly when none matches.
func TestGitSemVer(t *testing.T) {
	repo := gittest.NewRepo(t)
	one := repo.Commit("a", map[string]string{"a.yaml": policyNamed("a")})
	repo.Tag("v1.0.0", one)
	two := repo.Commit("b", map[string]string{"b.yaml": policyNamed("b")})
	repo.LightweightTag("1.1.0", two)
	three := repo.Commit("c", map[string]string{"c.yaml": policyNamed("c")})
	repo.Tag("v2.0.0", three)
	repo.Tag("latest", three)
	repo.Tag("v1.2.0-rc.1", three)
	ctx := context.Background()

	g, err := NewGit(GitOptions{URL: repo.URL(), SemVer: ">=1.0.0 <2.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	got, rev, _, err := g.fetch(ctx, "")
	if err != nil || len(got.policies) != 2 || rev != "1.1.0@sha1:"+two.String() {
		t.Fatalf("the highest tag in range: %d policies, revision %q, %v", len(got.policies), rev, err)
	}
	if _, _, unchanged, err := g.fetch(ctx, rev); err != nil || !unchanged {
		t.Fatalf("no new tag: unchanged %v, %v", unchanged, err)
	}

	repo.Branch("release-1", two)
	four := repo.Commit("d", map[string]string{"d.yaml": policyNamed("d")})
	repo.Tag("v1.3.0", four)
	got, rev, _, err = g.fetch(ctx, rev)
	if err != nil || len(got.policies) != 3 || rev != "v1.3.0@sha1:"+four.String() {
		t.Fatalf("after v1.3.0 is pushed: %d policies, revision %q, %v", len(got.policies), rev, err)
	}

	none, err := NewGit(GitOptions{URL: repo.URL(), SemVer: ">=3.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := none.fetch(ctx, ""); err == nil || !strings.Contains(err.Error(), `no tag in the semver range ">=3.0.0"`) {
		t.Errorf("no tag in range: %v", err)
	}
}

// TestGitCommit: a pinned commit is read as it was, whatever its branch does
// later, and never fetched twice.
func TestGitCommit(t *testing.T) {
	repo := gittest.NewRepo(t)
	first := repo.Commit("a", map[string]string{"a.yaml": policyNamed("a")})
	repo.Commit("b", map[string]string{"b.yaml": policyNamed("b")})
	ctx := context.Background()
	t.Setenv("TMPDIR", t.TempDir()) // counted alone, whatever else runs
	before := sproutGitDirs(t)

	pinned, err := NewGit(GitOptions{URL: repo.URL(), Branch: "main", Commit: first.String(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := &recorder{}
	pinned.poll(ctx, h)
	if len(h.failures) != 0 || len(h.upserts) != 1 || h.upserts[0] != "a@main@sha1:"+first.String() {
		t.Fatalf("the pinned commit: %+v", h)
	}

	// The branch moves and then the remote goes away: the pin needs neither.
	repo.Commit("d", map[string]string{"d.yaml": policyNamed("d")})
	away := repo.Dir + ".away"
	if err := os.Rename(repo.Dir, away); err != nil {
		t.Fatal(err)
	}
	pinned.poll(ctx, h)
	if len(h.failures) != 0 || len(h.upserts) != 1 || len(h.deletes) != 0 {
		t.Fatalf("a pinned commit was fetched again: %+v", h)
	}
	if err := os.Rename(away, repo.Dir); err != nil {
		t.Fatal(err)
	}

	repo.Branch("feature", first)
	feature := repo.Commit("c on a branch", map[string]string{"c.yaml": policyNamed("c")})
	anyBranch, err := NewGit(GitOptions{URL: repo.URL(), Commit: feature.String()})
	if err != nil {
		t.Fatal(err)
	}
	got, rev, _, err := anyBranch.fetch(ctx, "")
	if err != nil || len(got.policies) != 2 || rev != "sha1:"+feature.String() {
		t.Fatalf("a commit on another branch, no branch given: %d policies, revision %q, %v", len(got.policies), rev, err)
	}

	for name, opts := range map[string]GitOptions{
		"a commit not on the branch": {URL: repo.URL(), Branch: "main", Commit: feature.String()},
		"an unknown commit":          {URL: repo.URL(), Commit: "0123456789abcdef0123456789abcdef01234567"},
	} {
		g, err := NewGit(opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := g.fetch(ctx, ""); err == nil || !strings.Contains(err.Error(), "has no commit "+opts.Commit) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if after := sproutGitDirs(t); after != before {
		t.Errorf("fetches left %d working trees behind", after-before)
	}
}

// recorder is a Handler that records what a source hands over.
type recorder struct {
	upserts, deletes, releases []string
	failures                   []error
	complete                   int
}

func (r *recorder) Upsert(p Policy)               { r.upserts = append(r.upserts, p.GetName()+"@"+p.Revision) }
func (r *recorder) Delete(p Policy)               { r.deletes = append(r.deletes, p.GetName()) }
func (r *recorder) Release(p Policy)              { r.releases = append(r.releases, p.GetName()) }
func (r *recorder) Invalid(string, string, error) {}
func (r *recorder) SourceChecked(_ string, st Status) {
	if st.Err != nil {
		r.failures = append(r.failures, st.Err)
	}
}
func (r *recorder) SourceComplete(string) { r.complete++ }

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
