//go:build demo

package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/sources"
)

// The Git repository the demo makes: the scenario's folder, committed on
// demoBranch, read by a Git source from demoGitPath every demoPollInterval.
const (
	demoBranch       = "main"
	demoGitPath      = "policies"
	demoPollInterval = time.Second
)

// hasPolicyFolder reports whether a scenario is a repository layout (a
// policies/ folder, run from Git) rather than one policy.yaml.
func hasPolicyFolder(scenario fs.FS) bool {
	info, err := fs.Stat(scenario, demoGitPath)
	return err == nil && info.IsDir()
}

// commitScenario writes every file of a scenario into a new Git repository at
// dir and commits them on demoBranch. It returns the revision as a Git source
// names it (main@sha1:…).
func commitScenario(dir, scenario string, files fs.FS) (string, error) {
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(demoBranch)},
	})
	if err != nil {
		return "", fmt.Errorf("init a Git repository at %s: %w", dir, err)
	}
	err = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("copy fixtures/%s to %s: %w", scenario, dir, err)
	}
	// A committer in the repository's own config, so that `git commit` works
	// there for someone following the demo's hint without a global identity.
	cfg, err := repo.Config()
	if err != nil {
		return "", err
	}
	cfg.User.Name, cfg.User.Email = "Sprout demo", "demo@sprout.invalid"
	if err := repo.SetConfig(cfg); err != nil {
		return "", err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return "", err
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return "", fmt.Errorf("git add in %s: %w", dir, err)
	}
	hash, err := wt.Commit("Platform repository from fixtures/"+scenario, &git.CommitOptions{
		Author: &object.Signature{Name: cfg.User.Name, Email: cfg.User.Email, When: time.Now()},
	})
	if err != nil {
		return "", fmt.Errorf("git commit in %s: %w", dir, err)
	}
	return demoBranch + "@sha1:" + hash.String(), nil
}

// reportingSource is a Git source that prints what it hands the controller:
// each revision as it is taken, each policy gone from Git and each
// rejected revision. It closes taken once the first revision is in.
type reportingSource struct {
	*sources.GitSource
	out   io.Writer
	taken chan struct{}
}

var _ sources.Source = (*reportingSource)(nil)

// Start starts the Git source with a handler that prints, then passes on.
func (r *reportingSource) Start(ctx context.Context, h sources.Handler) error {
	return r.GitSource.Start(ctx, &reportingHandler{Handler: h, out: r.out, taken: r.taken})
}

// reportingHandler prints before it passes each call on, so a revision's
// line comes before the objects it changes. The Git source calls it from
// one goroutine at a time.
type reportingHandler struct {
	sources.Handler
	out      io.Writer
	taken    chan struct{}
	revision string
	rejected string
}

func (h *reportingHandler) Upsert(p sources.Policy) {
	if p.Revision != h.revision {
		h.revision, h.rejected = p.Revision, ""
		fmt.Fprintf(h.out, "took %s from Git\n", p.Revision)
	}
	h.Handler.Upsert(p)
}

func (h *reportingHandler) Delete(p sources.Policy) {
	fmt.Fprintf(h.out, "%s is no longer in Git\n", celenv.PolicyRef(p.Policy))
	h.Handler.Delete(p)
}

func (h *reportingHandler) SourceChecked(source string, st sources.Status) {
	if st.Err != nil && st.Err.Error() != h.rejected { // once, not at every poll
		h.rejected = st.Err.Error()
		fmt.Fprintf(h.out, "Git: revision rejected, the last good one keeps running: %v\n", st.Err)
	}
	h.Handler.SourceChecked(source, st)
}

func (h *reportingHandler) SourceComplete(source string) {
	h.Handler.SourceComplete(source)
	close(h.taken) // called once, after the first revision's policies
}
