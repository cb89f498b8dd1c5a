package lib

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// hashLibrary declares Kyverno's hash functions, global and, as Kyverno
// 1.18 added them, under hash. (hash.sha256); each returns the lowercase hex digest of the string's
// UTF-8 bytes. They are checksums for names and change detection; md5 and
// sha1 are there for compatibility, not for security:
//
//	sha256(string) -> string   // sha256("abc") → "ba7816bf…"
//	sha1(string) -> string
//	md5(string) -> string
func hashLibrary() cel.EnvOption {
	var opts []cel.EnvOption
	for _, prefix := range []string{"", "hash."} {
		opts = append(opts,
			hashFunction(prefix, "sha256", sha256.New),
			hashFunction(prefix, "sha1", sha1.New),
			hashFunction(prefix, "md5", md5.New))
	}
	return cel.Lib(utilityLibrary{compile: opts})
}

// hashFunction declares prefix+name; its overload is name_string, or
// hash_name_string under the prefix.
func hashFunction(prefix, name string, newHash func() hash.Hash) cel.EnvOption {
	id := strings.ReplaceAll(prefix, ".", "_") + name + "_string"
	return cel.Function(prefix+name, cel.Overload(id,
		[]*cel.Type{cel.StringType}, cel.StringType,
		cel.UnaryBinding(func(v ref.Val) ref.Val {
			s, ok := v.(types.String)
			if !ok {
				return types.MaybeNoSuchOverloadErr(v)
			}
			h := newHash()
			h.Write([]byte(s))
			return types.String(hex.EncodeToString(h.Sum(nil)))
		})))
}
