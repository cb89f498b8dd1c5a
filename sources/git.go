package sources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// GitOptions describe a Git source.
type GitOptions struct {
	// URL of the repository: https://, ssh:// or file://.
	URL string
	// Branch to follow; the remote's default branch when Branch and Tag are empty.
	Branch string
	// Tag to follow instead of a branch.
	Tag string
	// Path inside the repository to read policies from; the root when empty.
	Path string
	// Interval between checks of the remote ref.
	Interval time.Duration
	// Timeout bounds one check and one fetch.
	Timeout time.Duration
	// Auth authenticates to the remote; nil for none.
	Auth transport.AuthMethod
}

// BasicAuth authenticates over HTTPS with a user name and password (or a
// token as password, as GitHub and GitLab accept).
func BasicAuth(user, password string) transport.AuthMethod {
	return &githttp.BasicAuth{Username: user, Password: password}
}

// TokenAuth authenticates over HTTPS with a bearer token.
func TokenAuth(token string) transport.AuthMethod {
	return &githttp.TokenAuth{Token: token}
}

// GitSource polls a Git repository. It asks the remote which commit the ref
// points to first, and fetches only when that moved: a shallow clone of the
// one ref into a temporary folder, read with Load and removed at once.
type GitSource struct {
	*poller
	opts GitOptions
}

var _ Source = (*GitSource)(nil)

// NewGit returns a source of the policies in a Git repository.
func NewGit(opts GitOptions) (*GitSource, error) {
	if opts.URL == "" {
		return nil, errors.New("git source: a URL is required")
	}
	if opts.Branch != "" && opts.Tag != "" {
		return nil, errors.New("git source: give a branch or a tag, not both")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Minute
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	g := &GitSource{opts: opts}
	g.poller = newPoller("git:"+opts.URL, opts.Interval, g.fetch)
	return g, nil
}

func (g *GitSource) fetch(ctx context.Context, last string) ([]apiv1.Policy, string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opts.Timeout)
	defer cancel()
	ref, hash, err := g.resolve(ctx)
	if err != nil {
		return nil, "", false, err
	}
	revision := ref.Short() + "@sha1:" + hash.String()
	if revision == last {
		return nil, revision, true, nil
	}
	dir, err := os.MkdirTemp("", "sprout-git-")
	if err != nil {
		return nil, "", false, err
	}
	defer os.RemoveAll(dir) // no working tree left behind
	_, err = git.PlainCloneContext(ctx, dir, false, &git.CloneOptions{
		URL:           g.opts.URL,
		Auth:          g.opts.Auth,
		ReferenceName: ref,
		SingleBranch:  true,
		Depth:         1,
		Tags:          git.NoTags,
	})
	if err != nil {
		return nil, "", false, fmt.Errorf("clone %s at %s: %w", g.opts.URL, ref.Short(), err)
	}
	root := path.Clean(strings.TrimPrefix(g.opts.Path, "/"))
	if root == "" {
		root = "."
	}
	policies, _, err := Load(os.DirFS(dir), root)
	if err != nil {
		return nil, "", false, fmt.Errorf("%s at %s: %w", g.opts.URL, revision, err)
	}
	return policies, revision, false, nil
}

// resolve asks the remote which commit the followed ref points to.
func (g *GitSource) resolve(ctx context.Context) (plumbing.ReferenceName, plumbing.Hash, error) {
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{g.opts.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: g.opts.Auth, Timeout: int(g.opts.Timeout.Seconds()), PeelingOption: git.AppendPeeled})
	if err != nil {
		return "", plumbing.ZeroHash, fmt.Errorf("list refs of %s: %w", g.opts.URL, err)
	}
	byName := map[plumbing.ReferenceName]*plumbing.Reference{}
	for _, r := range refs {
		byName[r.Name()] = r
	}
	var want plumbing.ReferenceName
	switch {
	case g.opts.Tag != "":
		want = plumbing.NewTagReferenceName(g.opts.Tag)
	case g.opts.Branch != "":
		want = plumbing.NewBranchReferenceName(g.opts.Branch)
	default:
		head, ok := byName[plumbing.HEAD]
		if !ok || head.Type() != plumbing.SymbolicReference {
			return "", plumbing.ZeroHash, fmt.Errorf("%s: no default branch; give a branch or a tag", g.opts.URL)
		}
		want = head.Target()
	}
	r, ok := byName[want]
	if !ok {
		return "", plumbing.ZeroHash, fmt.Errorf("%s has no %s", g.opts.URL, want)
	}
	// An annotated tag's peeled commit is listed as <tag>^{}.
	if peeled, ok := byName[plumbing.ReferenceName(string(want)+"^{}")]; ok {
		r = peeled
	}
	return want, r.Hash(), nil
}
