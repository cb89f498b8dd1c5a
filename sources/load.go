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
	c, revision, err := loadTree(fsWalk(fsys), dir)
	return c.policies, revision, err
}

// LoadFolder is Load of the folder dir on disk. dir itself may be a link
// (a checkout switched by git-sync is one); nothing in it is read through
// one.
func LoadFolder(dir string) (policies []Policy, revision string, err error) {
	c, revision, err := loadFolder(dir)
	return c.policies, revision, err
}

func loadFolder(dir string) (contents, string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return contents{}, "", err
	}
	defer root.Close()
	return loadTree(rootWalk(root), ".")
}

// contents are what a revision of a polled source holds.
type contents struct {
	policies   []Policy
	exceptions []Exception
}

// loadTree is Load through walk; the PolicyExceptions of the files come
// too, each compiled, and one that does not compile rejects the revision
// as a policy does.
func loadTree(walk walkFunc, dir string) (out contents, revision string, err error) {
	files, err := readTree(walk, dir, isPolicyFile, PolicyLimits)
	if err != nil {
		return contents{}, "", err
	}
	digest := sha256.New()
	var errs []error
	seen := map[string]string{}
	for _, f := range files {
		fmt.Fprintf(digest, "%s\x00%d\x00", f.Path, len(f.Data))
		digest.Write(f.Data)
		ps, es, err := apiv1.DecodeWithExceptions(f.Data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Path, err))
			continue
		}
		errs = append(errs, out.addExceptions(f.Path, es, seen)...)
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
			out.policies = append(out.policies, Policy{Policy: p, Program: prog})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return contents{}, "", &RejectedError{Err: err}
	}
	return out, "sha256:" + hex.EncodeToString(digest.Sum(nil))[:16], nil
}

// addExceptions compiles the exceptions of the file at path into c, and
// returns what stops one: a name used twice, a compile error.
func (c *contents) addExceptions(path string, es []*apiv1.PolicyException, seen map[string]string) []error {
	var errs []error
	for _, e := range es {
		ref := apiv1.PolicyExceptionKind + "/" + e.Namespace + "/" + e.Name
		if other, dup := seen[ref]; dup {
			errs = append(errs, fmt.Errorf("%s: %s is also defined in %s", path, ref, other))
			continue
		}
		seen[ref] = path
		ex := CompileException(e, "")
		if ex.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, ex.Err))
			continue
		}
		c.exceptions = append(c.exceptions, ex)
	}
	return errs
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
