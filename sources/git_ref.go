package sources

import (
	"context"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
)

// resolve asks the remote which commit the followed ref points to.
func (g *GitSource) resolve(ctx context.Context, auth transport.AuthMethod) (plumbing.ReferenceName, plumbing.Hash, error) {
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{g.opts.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth, Timeout: int(g.opts.Timeout.Seconds()), PeelingOption: git.AppendPeeled})
	if err != nil {
		return "", plumbing.ZeroHash, fmt.Errorf("list refs of %s: %w", g.opts.URL, err)
	}
	byName := map[plumbing.ReferenceName]*plumbing.Reference{}
	for _, r := range refs {
		byName[r.Name()] = r
	}
	var want plumbing.ReferenceName
	switch {
	case g.semver != nil:
		tag, ok := highestTag(refs, g.semver)
		if !ok {
			return "", plumbing.ZeroHash, fmt.Errorf("%s has no tag in the semver range %q", g.opts.URL, g.opts.SemVer)
		}
		want = tag
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

// highestTag returns the tag of the highest version in the range c. Tag
// names are read as semantic versions the way Flux reads them (a leading "v"
// is allowed, "1.2" is 1.2.0); tags that do not parse are skipped. Of two
// tags of one version ("v1.0.0" and "1.0.0") the greater name wins, so the
// choice does not depend on the listing's order.
func highestTag(refs []*plumbing.Reference, c *semver.Constraints) (plumbing.ReferenceName, bool) {
	var (
		best        plumbing.ReferenceName
		bestVersion *semver.Version
	)
	for _, r := range refs {
		name := r.Name()
		if !name.IsTag() || strings.HasSuffix(string(name), "^{}") {
			continue
		}
		v, err := semver.NewVersion(name.Short())
		if err != nil || !c.Check(v) {
			continue
		}
		if bestVersion == nil || v.GreaterThan(bestVersion) || v.Equal(bestVersion) && name > best {
			best, bestVersion = name, v
		}
	}
	return best, bestVersion != nil
}
