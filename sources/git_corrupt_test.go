package sources

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/sprout-gitops/sprout/internal/gittest"
)

// TestCorruptPackKeepsTheLastGoodRevision: a remote that delivered a good
// revision and then serves the next one corrupt fails each check with an
// error naming the remote; the last good revision keeps running, nothing is
// deleted and no working tree is left behind. Once the remote serves a sound
// pack again, the new revision is taken. The pack is corrupted on its way
// (over smart HTTP) or the objects in the repository itself (file://).
func TestCorruptPackKeepsTheLastGoodRevision(t *testing.T) {
	tests := []struct {
		name     string
		overHTTP bool
		// corrupt breaks what the remote serves from now on and returns
		// how to mend it.
		corrupt func(t *testing.T, r *remote) (mend func())
	}{
		{name: "a byte in the middle of the pack flipped", overHTTP: true, corrupt: mangled(func(body []byte, pack int) []byte {
			body[pack+12+(len(body)-pack-12)/2] ^= 0x55
			return body
		})},
		{name: "the pack cut short", overHTTP: true, corrupt: mangled(func(body []byte, pack int) []byte {
			return body[:pack+(len(body)-pack)/2]
		})},
		// The object count heads the pack; go-git's indexer sized a slice
		// by it before reading any object, so 0xff000003 objects asked for
		// 128 GiB and the process died.
		{name: "the object count garbled", overHTTP: true, corrupt: mangled(func(body []byte, pack int) []byte {
			body[pack+8] = 0xff
			return body
		})},
		{name: "the new objects corrupt in the repository", corrupt: func(t *testing.T, r *remote) func() {
			path := filepath.Join(r.repo.Dir, ".git", "objects", r.blob.String()[:2], r.blob.String()[2:])
			sound, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("the changed policy's blob is not a loose object: %v", err)
			}
			garbled := bytes.Clone(sound)
			for i := len(garbled) / 2; i < len(garbled); i++ {
				garbled[i] ^= 0x55
			}
			if err := os.Chmod(path, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, garbled, 0o644); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := os.WriteFile(path, sound, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := gittest.NewRepo(t)
			good := repo.Commit("two policies", map[string]string{"a.yaml": policyNamed("a"), "b.yaml": policyNamed("b")})
			r := &remote{repo: repo, url: repo.URL()}
			var auth AuthFunc
			if tt.overHTTP {
				r.http = gittest.ServeHTTP(t, repo, "sprout", "s3cret")
				r.url = r.http.URL
				auth = FileAuth(r.url, AuthFiles{Username: "sprout", PasswordFile: writeFile(t, t.TempDir(), "password", []byte("s3cret"))})
			}
			g, err := NewGit(GitOptions{URL: r.url, Branch: "main", Timeout: 20 * time.Second, Auth: auth})
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv("TMPDIR", t.TempDir()) // counted alone, whatever else runs
			before := sproutGitDirs(t)
			h := &recorder{}
			ctx := context.Background()
			g.poll(ctx, h)
			if len(h.failures) != 0 || len(h.upserts) != 2 {
				t.Fatalf("the good revision: %+v", h)
			}
			goodRevision := "main@sha1:" + good.String()

			// The next revision changes a and removes b: taken, it would
			// upsert one and delete the other.
			changed := strings.Replace(policyNamed("a"), "generator.Apply(object.metadata.name, [])", "generator.Apply(object.metadata.name, []) || true", 1)
			r.blob = plumbing.ComputeHash(plumbing.BlobObject, []byte(changed))
			next := repo.Commit("a changed, b removed", map[string]string{"a.yaml": changed, "b.yaml": ""})
			mend := tt.corrupt(t, r)
			for i := 1; i <= 2; i++ {
				g.poll(ctx, h)
				if len(h.failures) != i || !strings.Contains(h.failures[i-1].Error(), r.url) {
					t.Fatalf("check %d of the corrupt revision: want a failure naming %s, got %v", i, r.url, h.failures)
				}
			}
			t.Logf("reported: %v", h.failures[0])
			if len(h.deletes) != 0 || len(h.upserts) != 2 {
				t.Errorf("a corrupt revision changed what runs: upserts %v, deletes %v", h.upserts, h.deletes)
			}
			if st := g.Status(); st.Check != CheckFailed || st.Err == nil || st.Revision != goodRevision || st.Policies != 2 {
				t.Errorf("status while corrupt: %+v, want a failed check with %s and its 2 policies running", st, goodRevision)
			}
			if after := sproutGitDirs(t); after != before {
				t.Errorf("failed fetches left %d working trees behind", after-before)
			}

			mend()
			g.poll(ctx, h)
			if st := g.Status(); st.Err != nil || st.Revision != "main@sha1:"+next.String() || st.Policies != 1 {
				t.Fatalf("status once the pack is sound: %+v", st)
			}
			if len(h.deletes) != 1 || h.deletes[0] != "b" || len(h.upserts) != 3 {
				t.Errorf("once the pack is sound: upserts %v, deletes %v; want a upserted and b deleted", h.upserts, h.deletes)
			}
		})
	}
}

// remote is the repository a test corrupts, and how Sprout reaches it.
type remote struct {
	repo *gittest.Repo
	url  string
	http *gittest.HTTPServer // nil over file://
	blob plumbing.Hash       // of the changed policy, new in the next revision
}

// mangled corrupts every upload-pack answer of the HTTP server with f, which
// gets a copy of the answer and where its pack begins ("PACK").
func mangled(f func(body []byte, pack int) []byte) func(*testing.T, *remote) func() {
	return func(t *testing.T, r *remote) func() {
		r.http.MangleUploadPack(func(body []byte) []byte {
			pack := bytes.Index(body, []byte("PACK"))
			if pack < 0 {
				return body // no pack: the test sees a sound answer and fails
			}
			return f(bytes.Clone(body), pack)
		})
		return func() { r.http.MangleUploadPack(nil) }
	}
}
