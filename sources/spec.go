package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// Spec describes the cluster source.
func (c *Cluster) Spec() sproutv1alpha1.PolicySourceSpec {
	return sproutv1alpha1.PolicySourceSpec{Name: ClusterSourceName, Type: "cluster"}
}

// Spec describes the folder and how often it is read.
func (d *DirectorySource) Spec() sproutv1alpha1.PolicySourceSpec {
	return sproutv1alpha1.PolicySourceSpec{Name: d.name, Type: "directory", URL: d.dir, Interval: d.interval.String()}
}

// Spec describes the repository, the ref followed and the path read.
func (g *GitSource) Spec() sproutv1alpha1.PolicySourceSpec {
	var refs []string
	switch {
	case g.opts.Tag != "":
		refs = append(refs, "tag "+g.opts.Tag)
	case g.opts.SemVer != "":
		refs = append(refs, "semver "+g.opts.SemVer)
	case g.opts.Branch != "":
		refs = append(refs, "branch "+g.opts.Branch)
	}
	if g.opts.Commit != "" {
		refs = append(refs, "commit "+g.opts.Commit)
	}
	ref := strings.Join(refs, ", ")
	if ref == "" {
		ref = "default branch"
	}
	return sproutv1alpha1.PolicySourceSpec{Name: g.name, Type: "git", URL: g.opts.URL, Ref: ref, Path: g.opts.Path, Interval: g.interval.String()}
}

// ObjectName is the name of a source's PolicySource object: "cluster" for
// the cluster, otherwise the source name made a valid object name, cut to a
// readable length and made unique by a digest of the whole name
// ("git-file-tmp-platform-3fa2b1c0").
func ObjectName(source string) string {
	if source == ClusterSourceName {
		return source
	}
	var b strings.Builder
	dash := true
	for _, r := range strings.ToLower(source) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	base := strings.TrimRight(b.String(), "-")
	if len(base) > 48 {
		base = strings.TrimRight(base[:48], "-")
	}
	sum := sha256.Sum256([]byte(source))
	return base + "-" + hex.EncodeToString(sum[:4])
}
