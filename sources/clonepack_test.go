package sources

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/sprout-gitops/sprout/internal/gittest"
)

// TestCloneOfALargeBlobIsBounded: a committer pushes a blob of zeros, tiny
// once compressed, far larger than any file Sprout reads, beside the
// policies (not a policy file itself, so nothing else would refuse it).
// The clone refuses it from the pack's headers, naming its size, without
// inflating it, and the revision is rejected
// (TestRejectedCloneKeepsTheLastGoodRevision: the last good one keeps
// running). Before, go-git inflated the blob into memory, twice, while it
// cloned, at every check.
func TestCloneOfALargeBlobIsBounded(t *testing.T) {
	const size = 64 << 20
	repo := gittest.NewRepo(t)
	repo.Commit("good", map[string]string{"policies/a.yaml": policyNamed("a"), "policies/b.yaml": policyNamed("b")})
	zeros := repo.Commit("zeros", map[string]string{"assets/zeros.bin": strings.Repeat("\x00", size)})
	for _, overHTTP := range []bool{false, true} {
		t.Run(fmt.Sprintf("over HTTP %v", overHTTP), func(t *testing.T) {
			url := repo.URL()
			var auth AuthFunc
			if overHTTP {
				url = gittest.ServeHTTP(t, repo, "sprout", "s3cret").URL
				auth = FileAuth(url, AuthFiles{Username: "sprout", PasswordFile: writeFile(t, t.TempDir(), "password", []byte("s3cret"))})
			}
			g, err := NewGit(GitOptions{URL: url, Branch: "main", Path: "policies", Timeout: time.Minute, Auth: auth})
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv("TMPDIR", t.TempDir())
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			g.poll(context.Background(), &recorder{})
			runtime.ReadMemStats(&after)
			st := g.Status()
			var rejected *RejectedError
			want := fmt.Sprintf("a blob of %d bytes, more than the %d one object of a clone may have", size, MaxCloneObjectSize)
			if !errors.As(st.Err, &rejected) || !strings.Contains(st.Err.Error(), want) || !strings.Contains(st.Err.Error(), url) {
				t.Errorf("the clone of %s: %T %v; want a rejection naming %s and %q", zeros, st.Err, st.Err, url, want)
			}
			t.Logf("refused with %v, having allocated %d KiB", st.Err, (after.TotalAlloc-before.TotalAlloc)>>10)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
				t.Errorf("the clone allocated %d MiB for a blob of %d MiB", alloc>>20, size>>20)
			}
			if n := sproutGitDirs(t); n != 0 {
				t.Errorf("the refused clone left %d folders behind", n)
			}
		})
	}
}

// TestRejectedCloneKeepsTheLastGoodRevision: a revision whose clone is
// refused for its size keeps the last good revision running, deletes
// nothing, and says why at each check; the next revision within the bounds
// is taken. The bounds are lowered, to keep the repository small.
func TestRejectedCloneKeepsTheLastGoodRevision(t *testing.T) {
	tests := []struct {
		name    string
		lim     cloneLimits
		files   map[string]string
		wantErr string
	}{
		{name: "one object too large", lim: cloneLimits{object: 8 << 10, total: 1 << 20, pack: 1 << 20},
			files:   map[string]string{"assets/big.bin": strings.Repeat("0123456789", 1000)},
			wantErr: "a blob of 10000 bytes, more than the 8192 one object of a clone may have"},
		{name: "too much together", lim: cloneLimits{object: 8 << 10, total: 40 << 10, pack: 1 << 20},
			files: map[string]string{
				"assets/1.bin": strings.Repeat("1", 8000), "assets/2.bin": strings.Repeat("2", 8000), "assets/3.bin": strings.Repeat("3", 8000),
				"assets/4.bin": strings.Repeat("4", 8000), "assets/5.bin": strings.Repeat("5", 8000), "assets/6.bin": strings.Repeat("6", 8000),
			},
			wantErr: "hold more than the 40960 bytes a clone may have"},
		{name: "a pack too large to receive", lim: cloneLimits{object: 1 << 20, total: 1 << 20, pack: 16 << 10},
			files:   map[string]string{"assets/noise.bin": noise(64 << 10)},
			wantErr: "the pack sent is more than the 16384 bytes a clone may receive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			saved := packLimits
			packLimits = tt.lim
			t.Cleanup(func() { packLimits = saved })
			repo, good, g, h := sourceAtGoodRevision(t)
			ctx := context.Background()

			repo.Commit("too large", tt.files)
			g.poll(ctx, h)
			g.poll(ctx, h)
			st := g.Status()
			var rejected *RejectedError
			if !errors.As(st.Err, &rejected) || !strings.Contains(st.Err.Error(), tt.wantErr) {
				t.Fatalf("status: %T %v; want a rejection with %q", st.Err, st.Err, tt.wantErr)
			}
			if len(h.failures) != 2 || len(h.deletes) != 0 || len(h.upserts) != 2 ||
				st.Check != CheckFailed || st.Revision != "main@sha1:"+good.String() || st.Policies != 2 {
				t.Fatalf("after the refused revision: %+v, status %+v", h, st)
			}
			if n := sproutGitDirs(t); n != 0 {
				t.Errorf("refused clones left %d folders behind", n)
			}

			packLimits = saved
			fixed := repo.Commit("within bounds again", map[string]string{"policies/c.yaml": policyNamed("c")})
			g.poll(ctx, h)
			if st := g.Status(); st.Err != nil || st.Revision != "main@sha1:"+fixed.String() || st.Policies != 3 {
				t.Fatalf("the next revision: %+v", st)
			}
		})
	}
}

// noise is n bytes that do not compress.
func noise(n int) string {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return string(b)
}

// TestCheckPackReadsDeltaTargets: a delta is small, but the object it makes
// may be as large as its header says: a few bytes of copies of a small
// base make a gigabyte. The pack is refused from the size the delta
// begins with, before anything is applied; a delta whose header is cut
// short is an error too. The packs are made by hand: git builds its own
// deltas and never sends such a one unless a server is made to.
func TestCheckPackReadsDeltaTargets(t *testing.T) {
	lim := cloneLimits{object: 1 << 20, total: 4 << 20, pack: 1 << 20}
	base := []byte("a small base")
	baseHash := plumbing.ComputeHash(plumbing.BlobObject, base)
	delta := func(head []byte) []byte {
		return append(head, 0x80|0x10, 0xff, 0xff) // copies, as many as it takes: never read
	}
	for _, tt := range []struct {
		name    string
		delta   []byte
		wantErr string
	}{
		{"a gigabyte made of a small base", delta(append(leb(uint64(len(base))), leb(1<<30)...)),
			"an object made by a delta of 1073741824 bytes, more than the 1048576 one object of a clone may have"},
		{"within bounds", delta(append(leb(uint64(len(base))), leb(1<<10)...)), ""},
		{"a header cut short", []byte{0x80}, "a delta's header is cut short"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pack := packOf(t, packObject(t, plumbing.BlobObject, nil, base), packObject(t, plumbing.REFDeltaObject, baseHash[:], tt.delta))
			err := checkPack(bytes.NewReader(pack), lim)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("checkPack: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("checkPack: %v; want %q", err, tt.wantErr)
			}
		})
	}
}

// leb writes n as a delta's header does: 7 bits a byte, least significant
// first.
func leb(n uint64) []byte {
	var out []byte
	for {
		c := byte(n & 0x7f)
		if n >>= 7; n == 0 {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

// packObject is one object of a pack: its type and size, a delta's base,
// its content compressed.
func packObject(t *testing.T, typ plumbing.ObjectType, ref []byte, content []byte) []byte {
	t.Helper()
	n := len(content)
	out := []byte{byte(typ)<<4 | byte(n&0x0f)}
	for n >>= 4; n > 0; n >>= 7 {
		out[len(out)-1] |= 0x80
		out = append(out, byte(n&0x7f))
	}
	out = append(out, ref...)
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	if _, err := w.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return append(out, z.Bytes()...)
}

// packOf is a pack of the objects, with a checksum nobody reads.
func packOf(t *testing.T, objects ...[]byte) []byte {
	t.Helper()
	out := []byte("PACK")
	out = binary.BigEndian.AppendUint32(out, 2)
	out = binary.BigEndian.AppendUint32(out, uint32(len(objects)))
	for _, o := range objects {
		out = append(out, o...)
	}
	return append(out, make([]byte, 20)...)
}
