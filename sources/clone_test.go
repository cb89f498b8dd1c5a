package sources

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"

	"github.com/sprout-gitops/sprout/internal/gittest"
)

// TestCloneIsRemovedOnEveryExit: a clone's temporary folder goes whether
// its read is rejected, fails or panics, and a panic is the check's error,
// not the end of the process (issue #25, item 9c). Before, the panic went
// on up and ended the process.
func TestCloneIsRemovedOnEveryExit(t *testing.T) {
	repo := gittest.NewRepo(t)
	repo.Commit("good", map[string]string{"a.yaml": policyNamed("a")})
	repo.CommitLink("link", "zero.yaml", "/dev/zero")
	t.Setenv("TMPDIR", t.TempDir())
	g, err := NewGit(GitOptions{URL: repo.URL(), Branch: "main", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, _, err := g.fetch(ctx, ""); err == nil {
		t.Fatal("a revision with a link was taken")
	}
	if n := sproutGitDirs(t); n != 0 {
		t.Fatalf("a rejected revision left %d clones", n)
	}
	clone := &git.CloneOptions{URL: repo.URL(), NoCheckout: true, Tags: git.NoTags}
	err = func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("withClone let a panic through: %v", r)
			}
		}()
		return g.withClone(ctx, clone, func(*git.Repository) error { panic("midway") })
	}()
	if err == nil || !strings.Contains(err.Error(), "reading the clone failed: midway") {
		t.Errorf("a read that panics: %v", err)
	}
	if n := sproutGitDirs(t); n != 0 {
		t.Errorf("a read that panicked left %d clones", n)
	}
}

// TestCloneOfAKilledProcessIsRemoved: a process killed while it reads a
// clone (out of memory, SIGKILL) runs no deferred removal; the next clone,
// by this process or another, removes its folder, but never one that a
// live process is reading (issue #25, item 9c). Before, each start of a
// crash-looping controller left one more clone in its temporary volume.
func TestCloneOfAKilledProcessIsRemoved(t *testing.T) {
	if url := os.Getenv("SPROUT_TEST_HOLD_CLONE"); url != "" {
		holdClone(t, url)
		return
	}
	repo := gittest.NewRepo(t)
	repo.Commit("good", map[string]string{"a.yaml": policyNamed("a")})
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	child := exec.Command(os.Args[0], "-test.run=^TestCloneOfAKilledProcessIsRemoved$")
	child.Env = append(os.Environ(), "SPROUT_TEST_HOLD_CLONE="+repo.URL())
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "holding the clone" {
	}

	g, err := NewGit(GitOptions{URL: repo.URL(), Branch: "main", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := g.fetch(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if n := sproutGitDirs(t); n != 1 {
		t.Fatalf("%d clones while another process reads its own; want that one", n)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait() // killed: its exit status is the kill
	if n := sproutGitDirs(t); n != 1 {
		t.Fatalf("%d clones after the kill; want the killed process's", n)
	}
	if _, _, _, err := g.fetch(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if n := sproutGitDirs(t); n != 0 {
		t.Errorf("the killed process's clone is still there after another clone (%d)", n)
	}
}

// holdClone clones url and holds the clone until the process is killed.
func holdClone(t *testing.T, url string) {
	g, err := NewGit(GitOptions{URL: url, Branch: "main"})
	if err != nil {
		t.Fatal(err)
	}
	clone := &git.CloneOptions{URL: url, NoCheckout: true, Tags: git.NoTags}
	_ = g.withClone(context.Background(), clone, func(*git.Repository) error {
		fmt.Println("holding the clone")
		select {}
	})
}
