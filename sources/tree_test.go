package sources

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// secretValue stands for what a file outside a policy folder holds: it must
// never reach an error, a status or an Event.
const secretValue = "s3cr3t-from-outside"

// folderCase is a policy folder holding one good policy, a.yaml, and what
// make adds to it.
type folderCase struct {
	name string
	// make adds entries to dir; outside is a folder beside it holding a
	// policy named after secretValue.
	make func(t *testing.T, dir, outside string)
	// wantErr must all appear in the error; none means the load succeeds
	// with policy a only.
	wantErr []string
}

func folderCases() []folderCase {
	link := func(name, target string) func(t *testing.T, dir, outside string) {
		return func(t *testing.T, dir, outside string) {
			target := strings.ReplaceAll(target, "OUTSIDE", outside)
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	sparse := func(sizes ...int64) func(t *testing.T, dir, outside string) {
		return func(t *testing.T, dir, outside string) {
			for i, size := range sizes {
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("big%d.yaml", i)))
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Truncate(size); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
		}
	}
	return []folderCase{
		{name: "a link to a file outside the folder", make: link("evil.yaml", "OUTSIDE/secret.yaml"),
			wantErr: []string{"evil.yaml: a symbolic link; only regular files are read"}},
		{name: "a relative link out of the folder", make: link("evil.yaml", "../outside/secret.yaml"),
			wantErr: []string{"evil.yaml: a symbolic link"}},
		{name: "a link to /dev/zero", make: link("zero.yaml", "/dev/zero"),
			wantErr: []string{"zero.yaml: a symbolic link"}},
		{name: "a link inside the folder", make: link("again.yml", "a.yaml"),
			wantErr: []string{"again.yml: a symbolic link"}},
		{name: "a named pipe", make: func(t *testing.T, dir, _ string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, wantErr: []string{"pipe.yaml: a named pipe; only regular files are read"}},
		{name: "a socket", make: func(t *testing.T, dir, _ string) {
			l, err := net.Listen("unix", filepath.Join(dir, "s.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
		}, wantErr: []string{"s.yaml: a socket"}},
		{name: "an oversized file", make: sparse(MaxFileSize + 1),
			wantErr: []string{fmt.Sprintf("big0.yaml: %d bytes, more than the %d a file may have", MaxFileSize+1, MaxFileSize)}},
		{name: "more bytes than a revision may hold", make: sparse(MaxFileSize, MaxFileSize, MaxFileSize, MaxFileSize, MaxFileSize),
			wantErr: []string{fmt.Sprintf("big3.yaml: the files up to this one hold more than the %d bytes one revision may have", MaxRevisionSize)}},
		{name: "more files than a revision may hold", make: func(t *testing.T, dir, _ string) {
			for i := range MaxRevisionFiles {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("empty%04d.yaml", i)), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}, wantErr: []string{fmt.Sprintf("more than the %d files one revision may have", MaxRevisionFiles)}},
		{name: "links and specials not named as policies are never opened", make: func(t *testing.T, dir, outside string) {
			link("README", "/dev/zero")(t, dir, outside)
			link("team", "OUTSIDE")(t, dir, outside) // a linked folder is not followed
			if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
}

// TestLoadFolderReadsOnlyRegularFiles: a policy folder is read through
// links, pipes or devices never, and within bounds always; anything else
// rejects the revision naming the path (issue #25, item 5). Before, a link
// to a file outside put its content into the error, /dev/zero was read
// until memory ran out and a named pipe blocked the source for ever.
func TestLoadFolderReadsOnlyRegularFiles(t *testing.T) {
	for _, tt := range folderCases() {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			dir, outside := filepath.Join(base, "policies"), filepath.Join(base, "outside")
			for _, d := range []string{dir, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte(policyNamed(secretValue)), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(policyNamed("a")), 0o644); err != nil {
				t.Fatal(err)
			}
			tt.make(t, dir, outside)

			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			policies, revision, err := loadWithin(t, dir)
			runtime.ReadMemStats(&after)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
				t.Errorf("LoadFolder allocated %d MiB", alloc>>20)
			}
			if len(tt.wantErr) == 0 {
				if err != nil || len(policies) != 1 || policies[0].GetName() != "a" {
					t.Fatalf("got %d policies, %v; want policy a alone", len(policies), err)
				}
				return
			}
			var rejected *RejectedError
			if !errors.As(err, &rejected) {
				t.Fatalf("error %T %v is not a rejected revision", err, err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secretValue) || policies != nil || revision != "" {
				t.Errorf("a rejected revision gave %d policies, revision %q, error %q", len(policies), revision, err)
			}
		})
	}
}

// loadWithin runs LoadFolder and fails the test if it does not return
// within a minute: a named pipe must not block it.
func loadWithin(t *testing.T, dir string) (policies []Policy, revision string, err error) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		policies, revision, err = LoadFolder(dir)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("LoadFolder is blocked")
	}
	return policies, revision, err
}
