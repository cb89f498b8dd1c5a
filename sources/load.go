package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"k8s.io/apimachinery/pkg/types"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
)

// RejectedError is a revision refused for what it holds (a document that
// does not decode, a policy that does not compile, a name used twice), as
// opposed to a remote that could not be read.
type RejectedError struct{ Err error }

func (e *RejectedError) Error() string { return e.Err.Error() }
func (e *RejectedError) Unwrap() error { return e.Err }

// Load reads every policy below dir in fsys (files ending in .yaml or .yml,
// recursively, several documents each) and compiles each one: the policies
// come with their Program, which nothing compiles again. It is all or
// nothing: any file that is not a regular one or is too large (readTree),
// any file that does not decode, any policy that does not compile and any
// name used twice fails the whole load, with every error named by file,
// document and field path, so a broken revision never half applies.
// The revision is a digest of the files read. A folder on disk is read
// with LoadFolder, which cannot be led out of it.
func Load(fsys fs.FS, dir string) (policies []Policy, revision string, err error) {
	return loadTree(fsWalk(fsys), dir)
}

// LoadFolder is Load of the folder dir on disk. dir itself may be a link
// (a checkout switched by git-sync is one); nothing in it is read through
// one.
func LoadFolder(dir string) (policies []Policy, revision string, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, "", err
	}
	defer root.Close()
	return loadTree(rootWalk(root), ".")
}

func loadTree(walk walkFunc, dir string) (policies []Policy, revision string, err error) {
	files, err := readTree(walk, dir, isPolicyFile, PolicyLimits)
	if err != nil {
		return nil, "", err
	}
	digest := sha256.New()
	var errs []error
	seen := map[string]string{}
	for _, f := range files {
		fmt.Fprintf(digest, "%s\x00%d\x00", f.Path, len(f.Data))
		digest.Write(f.Data)
		ps, err := apiv1.Decode(f.Data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Path, err))
			continue
		}
		for _, p := range ps {
			ref := celenv.PolicyRef(p)
			if other, dup := seen[ref]; dup {
				errs = append(errs, fmt.Errorf("%s: %s is also defined in %s", f.Path, ref, other))
				continue
			}
			seen[ref] = f.Path
			prog := celenv.Compile(p)
			if err := prog.Err(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", f.Path, err))
				continue
			}
			policies = append(policies, Policy{Policy: p, Program: prog})
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
