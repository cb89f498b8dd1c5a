package lib

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// imageType is the CEL type of a parsed image reference.
var imageType = cel.OpaqueType("image.Reference")

// imageLibrary declares Kyverno's image library:
//
//	parseImageReference(string) -> image.Reference   // image(string) is the older alias
//	isImage(string) -> bool
//	<image>.registry() -> string        // "index.docker.io" for Docker Hub
//	<image>.repository() -> string      // "library/nginx" for nginx
//	<image>.tag() -> string             // "latest" when absent; "" when there is a digest
//	<image>.digest() -> string          // "sha256:…", or ""
//	<image>.identifier() -> string      // the digest if any, else the tag
//	<image>.identifierWithSeparator() -> string   // ":1.2", "@sha256:…", ":1.2@sha256:…"
//	<image>.containsDigest() -> bool
//
// References are read as go-containerregistry (Kyverno's parser) reads them,
// without its dependency: see parseImageReference.
func imageLibrary() cel.EnvOption {
	parse := cel.UnaryBinding(func(v ref.Val) ref.Val {
		s, ok := v.(types.String)
		if !ok {
			return types.MaybeNoSuchOverloadErr(v)
		}
		img, err := parseImageReference(string(s))
		if err != nil {
			return types.WrapErr(err)
		}
		return img
	})
	opts := []cel.EnvOption{
		cel.Function("parseImageReference", cel.Overload("parseImageReference_string",
			[]*cel.Type{cel.StringType}, imageType, parse)),
		cel.Function("image", cel.Overload("image_string", []*cel.Type{cel.StringType}, imageType, parse)),
		cel.Function("isImage", cel.Overload("isImage_string", []*cel.Type{cel.StringType}, cel.BoolType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := v.(types.String)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				_, err := parseImageReference(string(s))
				return types.Bool(err == nil)
			}))),
		imageMethod("containsDigest", cel.BoolType, func(i imageRef) ref.Val { return types.Bool(i.digest != "") }),
	}
	for _, m := range []struct {
		name string
		get  func(imageRef) string
	}{
		{"registry", imageRef.registryName},
		{"repository", imageRef.repositoryName},
		{"tag", imageRef.tagName},
		{"digest", imageRef.digestName},
		{"identifier", imageRef.identifier},
		{"identifierWithSeparator", imageRef.identifierWithSeparator},
	} {
		opts = append(opts, imageMethod(m.name, cel.StringType, func(i imageRef) ref.Val { return types.String(m.get(i)) }))
	}
	return cel.Lib(utilityLibrary{compile: opts})
}

func imageMethod(name string, result *cel.Type, fn func(imageRef) ref.Val) cel.EnvOption {
	return cel.Function(name, cel.MemberOverload("image_"+name,
		[]*cel.Type{imageType}, result,
		cel.UnaryBinding(func(v ref.Val) ref.Val {
			img, ok := v.(imageRef)
			if !ok {
				return types.MaybeNoSuchOverloadErr(v)
			}
			return fn(img)
		})))
}

// The rules of go-containerregistry's name package, which Kyverno uses.
const (
	imageDockerHub  = "index.docker.io"
	imageDefaultTag = "latest"
	imageRepoChars  = "abcdefghijklmnopqrstuvwxyz0123456789_-./"
	imageTagChars   = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-."
	imageHexDigits  = "0123456789abcdef"
)

// imageRef is a parsed image reference, the value of an image.Reference.
type imageRef struct {
	original   string
	registry   string // never empty: Docker Hub is index.docker.io
	repository string // with library/ for Docker Hub's single-name images
	tag        string // as written; "" when absent
	digest     string // "sha256:<hex>"; "" when absent
}

var _ ref.Val = imageRef{}

func (i imageRef) registryName() string   { return i.registry }
func (i imageRef) repositoryName() string { return i.repository }
func (i imageRef) digestName() string     { return i.digest }

// tagName is Kyverno's tag(): a reference with a digest is read as a digest
// reference, whose tag is dropped.
func (i imageRef) tagName() string {
	switch {
	case i.digest != "":
		return ""
	case i.tag == "":
		return imageDefaultTag
	}
	return i.tag
}

func (i imageRef) identifier() string {
	if i.digest != "" {
		return i.digest
	}
	return i.tagName()
}

func (i imageRef) identifierWithSeparator() string {
	switch {
	case i.digest == "":
		return ":" + i.tagName()
	case i.tag == "":
		return "@" + i.digest
	}
	return ":" + i.tag + "@" + i.digest
}

// parseImageReference reads [registry/]repository[:tag][@sha256:digest] the
// way go-containerregistry's name.ParseReference does by default: the first
// path component is a registry only if it has a '.' or a ':' (so
// localhost/app is a Docker Hub repository), docker.io means index.docker.io,
// a single-name Docker Hub repository gets library/, the tag defaults to
// latest, repositories are lowercase and the digest is a sha256.
func parseImageReference(s string) (imageRef, error) {
	name, digest, hasDigest := strings.Cut(s, "@")
	img, err := parseImageName(name)
	if err == nil && hasDigest {
		err = checkImageDigest(digest)
	}
	if err != nil {
		return imageRef{}, fmt.Errorf("could not parse reference %q: %w", s, err)
	}
	img.original, img.digest = s, digest
	return img, nil
}

// parseImageName reads the part of a reference before any digest.
func parseImageName(s string) (imageRef, error) {
	name, tag := s, ""
	if i := strings.LastIndexByte(s, ':'); i >= 0 && !strings.Contains(s[i+1:], "/") {
		name, tag = s[:i], s[i+1:]
		if err := checkImageChars("tag", tag, imageTagChars, 1, 127); err != nil {
			return imageRef{}, err
		}
	}
	registry, repository := "", name
	if first, rest, ok := strings.Cut(name, "/"); ok && strings.ContainsAny(first, ".:") {
		registry, repository = first, rest
	}
	if err := checkImageChars("repository", repository, imageRepoChars, 2, 255); err != nil {
		return imageRef{}, err
	}
	if u, err := url.Parse("//" + registry); err != nil || u.Host != registry {
		return imageRef{}, fmt.Errorf("registry %q is not a valid host[:port]", registry)
	}
	if registry == "" || registry == "docker.io" {
		registry = imageDockerHub
	}
	if registry == imageDockerHub && !strings.Contains(repository, "/") {
		repository = "library/" + repository
	}
	return imageRef{registry: registry, repository: repository, tag: tag}, nil
}

func checkImageDigest(digest string) error {
	hex, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hex) != 64 || strings.Trim(hex, imageHexDigits) != "" {
		return errors.New("a digest must be sha256: and 64 lowercase hex digits")
	}
	return nil
}

func checkImageChars(what, s, allowed string, minLen, maxLen int) error {
	if len(s) < minLen || len(s) > maxLen {
		return fmt.Errorf("%s %q must be %d to %d characters long", what, s, minLen, maxLen)
	}
	for _, r := range s {
		if !strings.ContainsRune(allowed, r) {
			return fmt.Errorf("%s %q has an invalid character %q", what, s, r)
		}
	}
	return nil
}

func (i imageRef) ConvertToNative(t reflect.Type) (any, error) {
	if t.Kind() == reflect.String {
		return i.original, nil
	}
	return nil, fmt.Errorf("an image reference cannot be converted to %v", t)
}
func (i imageRef) ConvertToType(t ref.Type) ref.Val {
	if t.TypeName() == imageType.TypeName() {
		return i
	}
	return types.NewErr("an image reference cannot be converted to %s", t.TypeName())
}
func (i imageRef) Equal(other ref.Val) ref.Val {
	o, ok := other.(imageRef)
	return types.Bool(ok && i == o)
}
func (i imageRef) Type() ref.Type { return imageType }
func (i imageRef) Value() any     { return i }
