package sources

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path"
	"strings"

	"github.com/fluxcd/pkg/tar"
)

// MaxArtifactSize bounds a Flux artifact, as downloaded and as unpacked
// (the sizes its entries declare, all of them together, read or not):
// source-controller's tarball holds the whole repository, bucket or image,
// not only the policies, so it gets the bound Flux's own consumers use.
const MaxArtifactSize = tar.DefaultMaxUntarSize

// artifactClient downloads artifacts; each download's context bounds it.
var artifactClient = &http.Client{}

// digestAlgorithms are the digests source-controller may give an artifact
// that Sprout can check.
var digestAlgorithms = map[string]func() hash.Hash{
	"sha256": sha256.New,
	"sha384": sha512.New384,
	"sha512": sha512.New,
}

// fetchArtifact downloads the tarball at url, checks it against digest
// (status.artifact.digest, "<algorithm>:<hex>") and reads the policies
// below dir in it. A digest that does not match, or a tarball that holds
// what a Git revision may not, rejects it.
func fetchArtifact(ctx context.Context, url, digest, dir string) (contents, error) {
	algo, want, _ := strings.Cut(digest, ":")
	newHash := digestAlgorithms[algo]
	if newHash == nil {
		return contents{}, &RejectedError{Err: fmt.Errorf("status.artifact.digest %q: want sha256, sha384 or sha512", digest)}
	}
	file, err := os.CreateTemp("", "sprout-flux-*.tar.gz")
	if err != nil {
		return contents{}, err
	}
	defer os.Remove(file.Name())
	defer file.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return contents{}, fmt.Errorf("status.artifact.url %q: %w", url, err)
	}
	resp, err := artifactClient.Do(req)
	if err != nil {
		return contents{}, fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return contents{}, fmt.Errorf("download %s: %s", url, resp.Status)
	}
	h := newHash()
	n, err := io.Copy(io.MultiWriter(file, h), io.LimitReader(resp.Body, MaxArtifactSize+1))
	if err != nil {
		return contents{}, fmt.Errorf("download %s: %w", url, err)
	}
	if n > MaxArtifactSize {
		return contents{}, &RejectedError{Err: fmt.Errorf("%s: more than the %d bytes an artifact may have", url, MaxArtifactSize)}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return contents{}, &RejectedError{Err: fmt.Errorf("%s: digest %s:%s, not %s (status.artifact.digest)", url, algo, got, digest)}
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return contents{}, err
	}
	return untarPolicies(ctxReader{ctx, file}, dir)
}

// untarPolicies unpacks the entries of a tarball that readTree would look
// at (folders and policy files below dir) into a temporary folder, reads
// the policies there through readTree's rules and removes the folder.
// Flux's Untar refuses names leaving the folder and an archive over
// MaxArtifactSize; a policy file that is a link, or anything else not a
// regular file, is refused here with its path, as in a Git revision.
func untarPolicies(r io.Reader, dir string) (contents, error) {
	root := path.Clean(strings.TrimPrefix(dir, "/")) // "." when empty
	out, err := os.MkdirTemp("", "sprout-flux-*")
	if err != nil {
		return contents{}, err
	}
	defer os.RemoveAll(out)
	var refused []error
	found := root == "." // whether the tarball holds dir, or anything in it
	skip := func(name string, fi os.FileInfo) bool {
		p, mode := path.Clean(name), fi.Mode()
		if len(refused) >= maxEntryErrors {
			return true
		}
		switch {
		case root != "." && (p == root || strings.HasPrefix(root, p+"/")):
			// dir itself, or a folder on the way to it.
			found = found || p == root
			if !mode.IsDir() {
				refused = append(refused, fmt.Errorf("%s: %s, not a folder", p, kind(mode)))
				return true
			}
			return false
		case root != "." && !strings.HasPrefix(p, root+"/"):
			return true
		}
		found = true
		switch {
		case hiddenBelow(root, p):
			return true // readTree skips hidden folders
		case mode.IsDir():
			return false
		case !isPolicyFile(path.Base(p)):
			return true
		case !mode.IsRegular():
			refused = append(refused, notRegular(p, mode))
			return true
		}
		return false
	}
	if err := tar.Untar(r, out, tar.WithMaxUntarSize(MaxArtifactSize), tar.WithFilter(skip)); err != nil {
		return contents{}, &RejectedError{Err: fmt.Errorf("artifact: %w", err)}
	}
	if len(refused) > 0 {
		return contents{}, &RejectedError{Err: errors.Join(refused...)}
	}
	fsRoot, err := os.OpenRoot(out)
	if err != nil {
		return contents{}, err
	}
	defer fsRoot.Close()
	if !found {
		return contents{}, fmt.Errorf("%s: no such folder", root)
	}
	// A folder holding no policy file has had nothing unpacked into it.
	if err := fsRoot.MkdirAll(root, 0o700); err != nil {
		return contents{}, err
	}
	c, _, err := loadTree(rootWalk(fsRoot), root)
	return c, err
}

// hiddenBelow reports whether p lies in a hidden folder below root:
// readTree never enters those.
func hiddenBelow(root, p string) bool {
	rel := p
	if root != "." {
		rel = strings.TrimPrefix(p, root+"/")
	}
	dirs := strings.Split(rel, "/")
	for _, d := range dirs[:len(dirs)-1] {
		if strings.HasPrefix(d, ".") {
			return true
		}
	}
	return false
}

// ctxReader stops a read when its context ends: an archive of many small
// entries takes time to walk however small its total.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
