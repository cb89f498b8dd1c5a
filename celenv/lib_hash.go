package celenv

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"hash"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// hashLibrary declares Kyverno's hash functions, global and spelled as
// Kyverno spells them; each returns the lowercase hex digest of the string's
// UTF-8 bytes. They are checksums for names and change detection; md5 and
// sha1 are there for compatibility, not for security:
//
//	sha256(string) -> string   // sha256("abc") → "ba7816bf…"
//	sha1(string) -> string
//	md5(string) -> string
func hashLibrary() cel.EnvOption {
	return cel.Lib(utilityLibrary{compile: []cel.EnvOption{
		hashFunction("sha256", sha256.New),
		hashFunction("sha1", sha1.New),
		hashFunction("md5", md5.New),
	}})
}

func hashFunction(name string, newHash func() hash.Hash) cel.EnvOption {
	return cel.Function(name, cel.Overload(name+"_string",
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
