package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
)

// maxFileSize bounds one policy file: a larger one is an error, not a reason
// to read gigabytes (YAML bombs and huge documents from a repository).
const maxFileSize = 4 << 20

// RejectedError is a revision refused for what it holds (a document that
// does not decode, a policy that does not compile, a name used twice), as
// opposed to a remote that could not be read.
type RejectedError struct{ Err error }

func (e *RejectedError) Error() string { return e.Err.Error() }
func (e *RejectedError) Unwrap() error { return e.Err }

// Load reads every policy below dir in fsys (files ending in .yaml or .yml,
// recursively, several documents each) and compiles each one. It is all or
// nothing: any file that does not decode, any policy that does not compile
// and any name used twice fails the whole load, with every error named by
// file, document and field path, so a broken revision never half applies.
// The revision is a digest of the files read.
func Load(fsys fs.FS, dir string) (policies []apiv1.Policy, revision string, err error) {
	var files []string
	err = fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && strings.HasPrefix(d.Name(), ".") {
				return fs.SkipDir // .git and friends
			}
			return nil
		}
		if ext := path.Ext(p); ext == ".yaml" || ext == ".yml" {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	sort.Strings(files)
	digest := sha256.New()
	var errs []error
	seen := map[string]string{}
	for _, f := range files {
		info, err := fs.Stat(fsys, f)
		if err != nil {
			return nil, "", err
		}
		if info.Size() > maxFileSize {
			errs = append(errs, fmt.Errorf("%s: %d bytes, more than the %d a policy file may have", f, info.Size(), maxFileSize))
			continue
		}
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, "", err
		}
		fmt.Fprintf(digest, "%s\x00%d\x00", f, len(data))
		digest.Write(data)
		ps, err := apiv1.Decode(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
			continue
		}
		for _, p := range ps {
			ref := celenv.PolicyRef(p)
			if other, dup := seen[ref]; dup {
				errs = append(errs, fmt.Errorf("%s: %s is also defined in %s", f, ref, other))
				continue
			}
			seen[ref] = f
			if err := celenv.Compile(p).Err(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", f, err))
				continue
			}
			policies = append(policies, p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, "", &RejectedError{Err: err}
	}
	return policies, "sha256:" + hex.EncodeToString(digest.Sum(nil))[:16], nil
}

// identify gives a policy read from files the identity the cluster would
// give it: a UID stable for its source and name, and a generation that
// changes when its spec does (so an unchanged policy is not recompiled).
func identify(p apiv1.Policy, source string) {
	id := sha256.Sum256([]byte(source + "\x00" + celenv.PolicyRef(p)))
	h := hex.EncodeToString(id[:16])
	p.SetUID(types.UID(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]))
	spec, _ := json.Marshal(p.PolicySpec())
	sum := sha256.Sum256(spec)
	var gen int64
	for _, b := range sum[:7] {
		gen = gen<<8 | int64(b)
	}
	p.SetGeneration(gen)
}
