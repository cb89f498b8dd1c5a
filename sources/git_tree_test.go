package sources

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/sprout-gitops/sprout/internal/gittest"
)

// TestGitRefusesCommittedLinks: a link committed to the repository is
// never followed, wherever it points; it rejects the revision naming its
// path, and so do an oversized blob and a --git-path that is a link
// (issue #25, item 5). Before, a relative link to /dev/zero was read until
// memory ran out.
func TestGitRefusesCommittedLinks(t *testing.T) {
	tests := []struct {
		name    string
		path    string // --git-path
		commit  func(r *gittest.Repo)
		wantErr string
	}{
		{name: "a relative link to /dev/zero", path: "policies",
			commit: func(r *gittest.Repo) {
				r.CommitLink("zero", "policies/zero.yaml", strings.Repeat("../", 40)+"dev/zero")
			},
			wantErr: "policies/zero.yaml: a symbolic link; only regular files are read"},
		{name: "an absolute link out of the checkout", path: "",
			commit:  func(r *gittest.Repo) { r.CommitLink("passwd", "passwd.yaml", "/etc/passwd") },
			wantErr: "passwd.yaml: a symbolic link"},
		{name: "a link to a policy beside it", path: "policies",
			commit:  func(r *gittest.Repo) { r.CommitLink("again", "policies/again.yaml", "a.yaml") },
			wantErr: "policies/again.yaml: a symbolic link"},
		{name: "the --git-path a link", path: "linked",
			commit:  func(r *gittest.Repo) { r.CommitLink("linked", "linked", "policies") },
			wantErr: "linked: a symbolic link, not a folder"},
		{name: "an oversized blob", path: "policies",
			commit: func(r *gittest.Repo) {
				r.Commit("big", map[string]string{"policies/big.yaml": "#" + strings.Repeat(" ", MaxFileSize)})
			},
			wantErr: fmt.Sprintf("policies/big.yaml: %d bytes, more than the %d a file may have", MaxFileSize+1, MaxFileSize)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := gittest.NewRepo(t)
			repo.Commit("good", map[string]string{"policies/a.yaml": policyNamed("a"), "a.yaml": policyNamed("root")})
			tt.commit(repo)
			g, err := NewGit(GitOptions{URL: repo.URL(), Branch: "main", Path: tt.path, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			got, _, _, err := g.fetch(context.Background(), "")
			runtime.ReadMemStats(&after)
			var rejected *RejectedError
			if !errors.As(err, &rejected) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("fetch: %d policies, error %T %v; want a rejection with %q", len(got.policies), err, err, tt.wantErr)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("the fetch allocated %d MiB", alloc>>20)
			}
		})
	}
}

// TestGitLinkKeepsTheLastGoodRevision: a running Git source that meets a
// committed link keeps the policies of its last good revision, deletes
// nothing and says why at each check; the next good commit is taken. Before,
// the process died out of memory at each start, reading the link again.
func TestGitLinkKeepsTheLastGoodRevision(t *testing.T) {
	repo, good, g, h := sourceAtGoodRevision(t)
	ctx := context.Background()

	repo.CommitLink("zero", "policies/zero.yaml", "../../../../../../../../../../dev/zero")
	g.poll(ctx, h)
	g.poll(ctx, h)
	st := g.Status()
	if len(h.failures) != 2 || len(h.deletes) != 0 || len(h.upserts) != 2 {
		t.Fatalf("after the link: %d failures, deletes %v, upserts %v", len(h.failures), h.deletes, h.upserts)
	}
	if st.Check != CheckFailed || st.Revision != "main@sha1:"+good.String() || st.Policies != 2 ||
		st.Err == nil || !strings.Contains(st.Err.Error(), "policies/zero.yaml: a symbolic link") {
		t.Fatalf("status after the link: %+v", st)
	}
	if n := sproutGitDirs(t); n != 0 {
		t.Errorf("rejected revisions left %d clones behind", n)
	}

	fixed := repo.Commit("link removed", map[string]string{"policies/zero.yaml": "", "policies/c.yaml": policyNamed("c")})
	g.poll(ctx, h)
	if st := g.Status(); st.Err != nil || st.Revision != "main@sha1:"+fixed.String() || st.Policies != 3 {
		t.Fatalf("after the fix: %+v", st)
	}
}

// sourceAtGoodRevision makes a repository whose first commit, good, holds
// the policies a and b in policies/, and a Git source of that folder that
// has taken it, reporting to h. Its clones go to a TMPDIR of the test's,
// for sproutGitDirs to count.
func sourceAtGoodRevision(t *testing.T) (repo *gittest.Repo, good plumbing.Hash, g *GitSource, h *recorder) {
	t.Helper()
	repo = gittest.NewRepo(t)
	good = repo.Commit("good", map[string]string{"policies/a.yaml": policyNamed("a"), "policies/b.yaml": policyNamed("b")})
	g, err := NewGit(GitOptions{URL: repo.URL(), Branch: "main", Path: "policies", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	h = &recorder{}
	g.poll(context.Background(), h)
	if len(h.upserts) != 2 || len(h.failures) != 0 {
		t.Fatalf("the good revision: %+v", h)
	}
	return repo, good, g, h
}

// TestGitTreeOfSharedSubtreesIsBounded: Git trees share subtrees, so a few
// kilobytes of tree objects name a folder of a trillion entries (each
// level a thousand names for the same subtree), and a chain of trees a
// folder thousands deep. Either rejects the revision after a bounded walk,
// naming where it stopped.
func TestGitTreeOfSharedSubtreesIsBounded(t *testing.T) {
	store := memory.NewStorage()
	put := func(entries []object.TreeEntry) plumbing.Hash {
		t.Helper()
		o := store.NewEncodedObject()
		if err := (&object.Tree{Entries: entries}).Encode(o); err != nil {
			t.Fatal(err)
		}
		h, err := store.SetEncodedObject(o)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	leaf := store.NewEncodedObject()
	leaf.SetType(plumbing.BlobObject)
	leafHash, err := store.SetEncodedObject(leaf)
	if err != nil {
		t.Fatal(err)
	}
	wide := put([]object.TreeEntry{{Name: "x.txt", Mode: filemode.Regular, Hash: leafHash}})
	for level := 0; level < 4; level++ {
		var entries []object.TreeEntry
		for i := range 1000 {
			entries = append(entries, object.TreeEntry{Name: fmt.Sprintf("d%04d", i), Mode: filemode.Dir, Hash: wide})
		}
		wide = put(entries)
	}
	deep := put([]object.TreeEntry{{Name: "x.txt", Mode: filemode.Regular, Hash: leafHash}})
	for range 5000 {
		deep = put([]object.TreeEntry{{Name: "d", Mode: filemode.Dir, Hash: deep}})
	}
	for name, root := range map[string]plumbing.Hash{"wide": wide, "deep": deep} {
		t.Run(name, func(t *testing.T) {
			tree, err := object.GetTree(store, root)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, _, err := loadTree(gitWalk(store, tree), ".")
				done <- err
			}()
			select {
			case err := <-done:
				var rejected *RejectedError
				if !errors.As(err, &rejected) || !strings.Contains(err.Error(), "one revision may have") {
					t.Fatalf("want the revision rejected at a bound, got %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("the walk still runs after 60 s")
			}
		})
	}
}
