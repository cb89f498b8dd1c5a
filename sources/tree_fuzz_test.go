package sources

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// What one fuzzed tree entry is.
const (
	fuzzRegular   = iota // a file: a policy, or bytes of the input
	fuzzLinkIn           // a link to a.yaml beside it
	fuzzLinkOut          // a link to a policy outside the folder
	fuzzLinkZero         // a link to /dev/zero
	fuzzLinkDir          // a link to the folder outside
	fuzzSpecial          // a named pipe in a folder, a submodule in Git
	fuzzOversized        // a file over MaxFileSize
	fuzzFull             // a file of MaxFileSize: a few of them fill a revision
	fuzzKinds
)

var (
	fuzzDirs  = []string{".", "sub", ".hidden"}
	fuzzNames = []string{"a.yaml", "b.yml", "c.yaml", "d.txt", "e"}
)

// fuzzEntry is one entry of a fuzzed tree.
type fuzzEntry struct {
	dir, name string
	kind      int
	data      []byte // of a regular file
	size      int64  // of an oversized or full one
}

func (e fuzzEntry) path() string { return path.Join(e.dir, e.name) }

// fuzzTree reads a small tree from the input: three bytes an entry (where,
// what, a parameter), at most eight entries, the rest as the content of
// regular files that do not hold a policy.
func fuzzTree(data []byte) []fuzzEntry {
	var entries []fuzzEntry
	rest := data
	if len(rest) > 24 {
		rest = data[24:]
	} else {
		rest = nil
	}
	for i := 0; i+3 <= len(data) && len(entries) < 8; i += 3 {
		where, what, param := data[i], data[i+1], data[i+2]
		e := fuzzEntry{dir: fuzzDirs[int(where)%len(fuzzDirs)], name: fuzzNames[int(where)/len(fuzzDirs)%len(fuzzNames)], kind: int(what) % fuzzKinds}
		switch e.kind {
		case fuzzRegular:
			e.data = []byte(policyNamed(fmt.Sprintf("p%d", param)))
			if param%2 == 1 {
				e.data = rest
			}
		case fuzzOversized:
			e.size = MaxFileSize + 1 + int64(param)
		case fuzzFull:
			e.size = MaxFileSize
		}
		entries = append(entries, e)
	}
	return entries
}

// refused is what Load must refuse among entries, by path: a link or a
// special entry named as a policy file, and an oversized file, outside
// hidden folders.
func refused(entries []fuzzEntry) []string {
	var paths []string
	for _, e := range entries {
		if e.dir == ".hidden" || !isPolicyFile(e.name) || e.kind == fuzzRegular || e.kind == fuzzFull {
			continue
		}
		paths = append(paths, e.path())
	}
	return paths
}

// FuzzLoadTree builds a small tree from the input, of policies, other
// files, links inside, outside and to /dev/zero, named pipes (submodules in
// Git), oversized files and files that fill a revision, once as a folder on
// disk read by LoadFolder and once as a Git commit in memory read by the Git
// loader (gitWalk: the clone before it is not fuzzed, to keep an input
// fast). Neither may panic, block or read outside: every refused entry is
// named in a rejection, or a revision limit stopped the walk first, nothing
// from outside reaches a policy or an error, and the memory allocated stays
// bounded.
func FuzzLoadTree(f *testing.F) {
	for _, seed := range [][]byte{
		{0, fuzzRegular, 0},
		{0, fuzzRegular, 0, 3, fuzzLinkIn, 0, 6, fuzzLinkOut, 0, 9, fuzzLinkZero, 0},
		{1, fuzzRegular, 2, 4, fuzzLinkDir, 0, 12, fuzzSpecial, 0, 2, fuzzLinkZero, 0},
		{0, fuzzOversized, 7, 3, fuzzFull, 0, 6, fuzzFull, 0, 1, fuzzFull, 0, 4, fuzzFull, 0, 7, fuzzFull, 0},
		{0, fuzzRegular, 1, 3, fuzzRegular, 1, 'k', 'i', 'n', 'd', ':', ' ', '['},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries := fuzzTree(data)
		base := t.TempDir()
		outside := filepath.Join(base, "outside")
		if err := os.Mkdir(outside, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte(policyNamed(secretValue)), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(base, "policies")
		made := makeFuzzFolder(t, dir, outside, entries)
		checkFuzzLoad(t, "folder", made, func() error {
			policies, _, err := LoadFolder(dir)
			return checkPolicies(policies, err)
		})
		store, tree := makeFuzzCommit(t, entries)
		checkFuzzLoad(t, "Git", entries, func() error {
			got, _, err := loadTree(gitWalk(store, tree), ".")
			return checkPolicies(got.policies, err)
		})
	})
}

// checkFuzzLoad runs load and checks what it refused and allocated.
func checkFuzzLoad(t *testing.T, what string, entries []fuzzEntry, load func() error) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := load()
	runtime.ReadMemStats(&after)
	// Decoding a document costs up to some eight times its size: a
	// revision at its limit allocates a few times that, never more.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16*MaxRevisionSize {
		t.Errorf("%s: the load allocated %d MiB", what, alloc>>20)
	}
	if err != nil && strings.Contains(err.Error(), secretValue) {
		t.Fatalf("%s: the error shows what is outside: %v", what, err)
	}
	want := refused(entries)
	if len(want) == 0 {
		return
	}
	var rejected *RejectedError
	if !errors.As(err, &rejected) {
		t.Fatalf("%s: %v refused by %T %v, not a rejected revision", what, want, err, err)
	}
	if strings.Contains(err.Error(), "one revision may have") {
		return // the walk stopped at a revision limit
	}
	for _, p := range want {
		if !strings.Contains(err.Error(), p+": ") {
			t.Errorf("%s: the rejection does not name %s: %v", what, p, err)
		}
	}
}

// checkPolicies turns a policy read from outside into an error.
func checkPolicies(policies []Policy, err error) error {
	for _, p := range policies {
		if p.GetName() == secretValue {
			return fmt.Errorf("a policy was read from outside the tree")
		}
	}
	return err
}

// makeFuzzFolder makes entries in dir and returns those it could make (a
// name used twice is made once).
func makeFuzzFolder(t *testing.T, dir, outside string, entries []fuzzEntry) []fuzzEntry {
	t.Helper()
	var made []fuzzEntry
	for _, e := range entries {
		p := filepath.Join(dir, filepath.FromSlash(e.path()))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		var err error
		switch e.kind {
		case fuzzRegular:
			err = os.WriteFile(p, e.data, 0o644)
		case fuzzLinkIn:
			err = os.Symlink("a.yaml", p)
		case fuzzLinkOut:
			err = os.Symlink(filepath.Join(outside, "secret.yaml"), p)
		case fuzzLinkZero:
			err = os.Symlink("/dev/zero", p)
		case fuzzLinkDir:
			err = os.Symlink(outside, p)
		case fuzzSpecial:
			err = syscall.Mkfifo(p, 0o644)
		case fuzzOversized, fuzzFull:
			err = os.WriteFile(p, nil, 0o644)
			if err == nil {
				err = os.Truncate(p, e.size)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, e)
	}
	return made
}

// makeFuzzCommit stores entries as the tree of a commit in memory, names
// used twice and all, as a hostile repository may.
func makeFuzzCommit(t *testing.T, entries []fuzzEntry) (*memory.Storage, *object.Tree) {
	t.Helper()
	store := memory.NewStorage()
	blob := func(data []byte) plumbing.Hash {
		o := store.NewEncodedObject()
		o.SetType(plumbing.BlobObject)
		w, err := o.Writer()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		h, err := store.SetEncodedObject(o)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	byDir := map[string][]object.TreeEntry{}
	for _, e := range entries {
		te := object.TreeEntry{Name: e.name, Mode: filemode.Symlink}
		switch e.kind {
		case fuzzRegular:
			te.Mode, te.Hash = filemode.Regular, blob(e.data)
		case fuzzLinkIn:
			te.Hash = blob([]byte("a.yaml"))
		case fuzzLinkOut:
			te.Hash = blob([]byte("../outside/secret.yaml"))
		case fuzzLinkZero:
			te.Hash = blob([]byte(strings.Repeat("../", 20) + "dev/zero"))
		case fuzzLinkDir:
			te.Hash = blob([]byte("../outside"))
		case fuzzSpecial:
			te.Mode, te.Hash = filemode.Submodule, plumbing.NewHash("0123456789abcdef0123456789abcdef01234567")
		case fuzzOversized, fuzzFull:
			te.Mode, te.Hash = filemode.Regular, blob(bytes.Repeat([]byte{'#'}, int(e.size)))
		}
		byDir[e.dir] = append(byDir[e.dir], te)
	}
	tree := func(entries []object.TreeEntry) *object.Tree {
		sort.SliceStable(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
		tr := &object.Tree{Entries: entries}
		o := store.NewEncodedObject()
		if err := tr.Encode(o); err != nil {
			t.Fatal(err)
		}
		if _, err := store.SetEncodedObject(o); err != nil {
			t.Fatal(err)
		}
		tr, err := object.DecodeTree(store, o)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	root := byDir["."]
	for _, d := range []string{"sub", ".hidden"} {
		if es, ok := byDir[d]; ok {
			root = append(root, object.TreeEntry{Name: d, Mode: filemode.Dir, Hash: tree(es).Hash})
		}
	}
	return store, tree(root)
}
