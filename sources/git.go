package sources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// GitOptions describe a Git source. At most one of Branch, Tag and SemVer
// names the ref to follow (the remote's default branch when none does);
// Commit pins one commit, alone or on a Branch.
type GitOptions struct {
	// URL of the repository: https://, ssh://, scp-like (git@host:path) or
	// file://.
	URL string
	// Branch to follow; the remote's default branch when nothing else is given.
	Branch string
	// Tag to follow instead of a branch.
	Tag string
	// SemVer follows the highest tag in this range (">=1.0.0 <2.0.0", "1.x").
	// Tag names are read as semantic versions with an optional leading "v";
	// tags that are not versions are ignored.
	SemVer string
	// Commit runs this commit (a full SHA-1) and nothing else. A commit never
	// moves, so once it is taken the remote is not asked again.
	Commit string
	// Path inside the repository to read policies from; the root when empty.
	Path string
	// Interval between checks of the remote ref.
	Interval time.Duration
	// Timeout bounds one check and one fetch.
	Timeout time.Duration
	// Auth returns the credentials of each check and fetch; nil for none. An
	// SSH URL needs it: Sprout never connects to a host it cannot verify.
	Auth AuthFunc
}

// GitSource polls a Git repository. It asks the remote which commit the ref
// points to first, and fetches only when that moved: a shallow clone of the
// one ref into a temporary folder, read like a folder and removed at once.
type GitSource struct {
	*poller
	opts   GitOptions
	semver *semver.Constraints // from opts.SemVer
	commit plumbing.Hash       // from opts.Commit
}

var _ Source = (*GitSource)(nil)

// NewGit returns a source of the policies in a Git repository.
func NewGit(opts GitOptions) (*GitSource, error) {
	g := &GitSource{opts: opts}
	if err := g.validate(); err != nil {
		return nil, fmt.Errorf("git source: %w", err)
	}
	if g.opts.Timeout <= 0 {
		g.opts.Timeout = time.Minute
	}
	if g.opts.Interval <= 0 {
		g.opts.Interval = time.Minute
	}
	g.poller = newPoller("git:"+opts.URL, g.opts.Interval, g.fetch)
	return g, nil
}

// validate checks the options and parses the range and the commit.
func (g *GitSource) validate() error {
	o := g.opts
	if o.URL == "" {
		return errors.New("a URL is required")
	}
	if _, err := transport.NewEndpoint(o.URL); err != nil {
		return fmt.Errorf("URL %q: %w", o.URL, err)
	}
	refs := 0
	for _, r := range []string{o.Branch, o.Tag, o.SemVer} {
		if r != "" {
			refs++
		}
	}
	if refs > 1 {
		return errors.New("give one of a branch, a tag or a semver range, not several")
	}
	if o.SemVer != "" {
		c, err := semver.NewConstraint(o.SemVer)
		if err != nil {
			return fmt.Errorf("semver range %q: %w", o.SemVer, err)
		}
		g.semver = c
	}
	if o.Commit != "" {
		if o.Tag != "" || o.SemVer != "" {
			return errors.New("a commit is pinned alone or on a branch, not with a tag or a semver range")
		}
		if !plumbing.IsHash(o.Commit) {
			return fmt.Errorf("commit %q is not a full 40-character SHA-1", o.Commit)
		}
		g.commit = plumbing.NewHash(o.Commit)
	}
	if IsSSHURL(o.URL) && o.Auth == nil {
		return errors.New("an SSH URL needs credentials: a private key and known_hosts")
	}
	return nil
}

func (g *GitSource) fetch(ctx context.Context, last string) (contents, string, bool, error) {
	if !g.commit.IsZero() {
		return g.fetchCommit(ctx, last)
	}
	ctx, cancel := context.WithTimeout(ctx, g.opts.Timeout)
	defer cancel()
	auth, err := g.auth(ctx)
	if err != nil {
		return contents{}, "", false, err
	}
	ref, hash, err := g.resolve(ctx, auth)
	if err != nil {
		return contents{}, "", false, err
	}
	revision := ref.Short() + "@sha1:" + hash.String()
	if revision == last {
		return contents{}, revision, true, nil
	}
	clone := &git.CloneOptions{
		URL:           g.opts.URL,
		Auth:          auth,
		ReferenceName: ref,
		SingleBranch:  true,
		Depth:         1,
		Tags:          git.NoTags,
		NoCheckout:    true,
	}
	return g.loadClone(ctx, clone, func(repo *git.Repository) (*object.Commit, string, error) {
		head, err := repo.Head()
		if err != nil {
			return nil, "", err
		}
		// The commit cloned, should the ref have moved since it was listed.
		commit, err := repo.CommitObject(head.Hash())
		return commit, ref.Short() + "@sha1:" + head.Hash().String(), err
	})
}

// fetchCommit takes the pinned commit once; after that it is unchanged
// without a word to the remote. Fetching one commit shallowly needs the
// server to allow it (uploadpack.allowReachableSHA1InWant), so the branch is
// cloned whole instead — every branch when none is given, as Flux does — and
// the commit read.
func (g *GitSource) fetchCommit(ctx context.Context, last string) (contents, string, bool, error) {
	revision := "sha1:" + g.commit.String()
	if g.opts.Branch != "" {
		revision = g.opts.Branch + "@" + revision
	}
	if revision == last {
		return contents{}, revision, true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.opts.Timeout)
	defer cancel()
	auth, err := g.auth(ctx)
	if err != nil {
		return contents{}, "", false, err
	}
	clone := &git.CloneOptions{URL: g.opts.URL, Auth: auth, NoCheckout: true, Tags: git.NoTags}
	where := "any branch"
	if g.opts.Branch != "" {
		clone.ReferenceName = plumbing.NewBranchReferenceName(g.opts.Branch)
		clone.SingleBranch = true
		where = "branch " + g.opts.Branch
	}
	return g.loadClone(ctx, clone, func(repo *git.Repository) (*object.Commit, string, error) {
		commit, err := repo.CommitObject(g.commit)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return nil, "", fmt.Errorf("%s has no commit %s on %s", g.opts.URL, g.commit, where)
		}
		return commit, revision, err
	})
}

// loadClone clones as clone says and loads the commit pick chooses in it,
// under the revision pick names.
func (g *GitSource) loadClone(ctx context.Context, clone *git.CloneOptions, pick func(*git.Repository) (*object.Commit, string, error)) (contents, string, bool, error) {
	var got contents
	var revision string
	err := g.withClone(ctx, clone, func(repo *git.Repository) error {
		commit, rev, err := pick(repo)
		if err != nil {
			return err
		}
		revision = rev
		got, err = g.load(repo, commit, revision)
		return err
	})
	if err != nil {
		return contents{}, "", false, err
	}
	return got, revision, false, nil
}

// auth asks for the credentials of one check or fetch.
func (g *GitSource) auth(ctx context.Context) (transport.AuthMethod, error) {
	if g.opts.Auth == nil {
		return nil, nil
	}
	auth, err := g.opts.Auth(ctx)
	if err != nil {
		return nil, fmt.Errorf("credentials for %s: %w", g.opts.URL, err)
	}
	return auth, nil
}

// clonePattern matches the temporary folders clones are made in.
const clonePattern = "sprout-git-*"

// withClone clones into a temporary folder, hands the repository to read
// and removes the folder: no clone is left behind, whether read returns,
// fails or panics (a panic is the check's error, not the process's end).
// Folders left by a killed process are removed first (sweepClones). Nothing
// is checked out: policies are read from the objects (load), so no file or
// link of the repository is ever written to disk.
func (g *GitSource) withClone(ctx context.Context, opts *git.CloneOptions, read func(repo *git.Repository) error) (err error) {
	sweepClones(os.TempDir())
	dir, err := os.MkdirTemp("", clonePattern)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: reading the clone failed: %v", g.opts.URL, r)
		}
	}()
	unlock, err := lockClone(dir)
	if err != nil {
		return err
	}
	defer unlock()
	worktree := osfs.New(dir)
	dot, err := worktree.Chroot(git.GitDirName)
	if err != nil {
		return err
	}
	// A blob over MaxFileSize is read lazily, so looking it up for its size
	// does not read it. The pack fetched is checked before it is read in
	// (cloneStorage), and the objects cached are bounded by what one
	// revision's files may hold.
	fsStore := filesystem.NewStorageWithOptions(dot, cache.NewObjectLRU(MaxRevisionSize), filesystem.Options{LargeObjectThreshold: MaxFileSize})
	store := cloneStorage{Storer: fsStore, dir: dir}
	repo, err := git.CloneContext(ctx, store, worktree, opts)
	if err != nil {
		ref := opts.ReferenceName.Short()
		if ref == "" {
			ref = "all branches"
		}
		return fmt.Errorf("clone %s at %s: %w", g.opts.URL, ref, err)
	}
	return read(repo)
}

// load reads the policies under Path of a commit, whole or not at all,
// from its objects through readTree, as a folder is read.
func (g *GitSource) load(repo *git.Repository, commit *object.Commit, revision string) (contents, error) {
	root := path.Clean(strings.TrimPrefix(g.opts.Path, "/")) // "." when empty
	tree, err := commit.Tree()
	if err != nil {
		return contents{}, fmt.Errorf("%s at %s: %w", g.opts.URL, revision, err)
	}
	c, _, err := loadTree(gitWalk(repo.Storer, tree), root)
	if err != nil {
		return contents{}, fmt.Errorf("%s at %s: %w", g.opts.URL, revision, err)
	}
	return c, nil
}
