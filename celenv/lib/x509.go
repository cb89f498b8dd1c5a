package lib

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// x509Library declares Kyverno's x509.decode:
//
//	x509.decode(pem) -> map   // x509.decode(object.data["tls.crt"]).NotAfter
//
// The certificate reads as Go's x509.Certificate does in JSON, as in
// Kyverno: fields in Go's names (Subject.CommonName, NotAfter, IsCA,
// DNSNames, …), numbers as doubles, times as RFC 3339 text, byte fields as
// base64, and an RSA public key as {N, E} with the modulus as decimal text.
func x509Library() cel.EnvOption {
	return cel.Lib(utilityLibrary{compile: []cel.EnvOption{
		cel.Function("x509.decode", cel.Overload("x509_decode_string",
			[]*cel.Type{cel.StringType}, cel.DynType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := v.(types.String)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				if err := checkParseSize("x509.decode", s); err != nil {
					return err
				}
				decoded, err := decodeCertificate([]byte(s))
				if err != nil {
					return types.WrapErr(fmt.Errorf("x509.decode: %w", err))
				}
				return types.DefaultTypeAdapter.NativeToValue(decoded)
			}))),
	}})
}

// rsaPublicKey is how an RSA key reads: the modulus as text, since a double
// cannot hold it.
type rsaPublicKey struct {
	N string
	E int
}

// decodeCertificate reads the first PEM block of text as a certificate.
func decodeCertificate(text []byte) (map[string]any, error) {
	block, _ := pem.Decode(text)
	if block == nil {
		return nil, fmt.Errorf("failed to decode PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, err
	}
	// Go's JSON cannot write every key type (an ECDSA key holds its curve's
	// functions); Kyverno reads RSA keys only.
	key, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("the certificate's public key is %s; only RSA keys can be decoded", cert.PublicKeyAlgorithm)
	}
	cert.PublicKey = rsaPublicKey{N: key.N.String(), E: key.E}
	raw, err := json.Marshal(cert)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out, nil
}
