package globalctx

import (
	"bytes"
	"crypto/x509"
	"encoding/asn1"
	"encoding/json"
	"encoding/pem"
	"errors"
	"reflect"

	"golang.org/x/crypto/cryptobyte"
	cryptobyteasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// x509PublicKey is how Kyverno's x509_decode shows an RSA key.
type x509PublicKey struct {
	N string
	E int
}

// jpX509Decode decodes a PEM certificate or certificate request with an
// RSA key into the object Kyverno's x509_decode gives: Go's
// x509.Certificate (or CertificateRequest) as JSON, the key as N and E.
func jpX509Decode(arguments []any) (any, error) {
	input, err := validateArg("x509_decode", arguments, 0, reflect.String)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode([]byte(input.String()))
	if block == nil {
		return nil, errors.New("failed to decode PEM block")
	}
	switch block.Type {
	case "CERTIFICATE":
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		if cert.PublicKey, err = rsaKey(cert.PublicKeyAlgorithm, cert.RawSubjectPublicKeyInfo); err != nil {
			return nil, err
		}
		return encodeJSON(cert)
	case "CERTIFICATE REQUEST":
		csr, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return nil, err
		}
		if csr.PublicKey, err = rsaKey(csr.PublicKeyAlgorithm, csr.RawSubjectPublicKeyInfo); err != nil {
			return nil, err
		}
		return encodeJSON(csr)
	}
	return nil, errors.New("PEM block neither contains a CERTIFICATE or CERTIFICATE REQUEST")
}

// rsaKey reads the RSA key of a subject public key info.
func rsaKey(alg x509.PublicKeyAlgorithm, spkiBytes []byte) (x509PublicKey, error) {
	if alg != x509.RSA {
		return x509PublicKey{}, errors.New("certificate should use rsa algorithm")
	}
	spki := cryptobyte.String(spkiBytes)
	var algorithm cryptobyte.String
	var key asn1.BitString
	if !spki.ReadASN1(&spki, cryptobyteasn1.SEQUENCE) || !spki.ReadASN1(&algorithm, cryptobyteasn1.SEQUENCE) || !spki.ReadASN1BitString(&key) {
		return x509PublicKey{}, errors.New("failed to parse subject public key info")
	}
	pk, err := x509.ParsePKCS1PublicKey(key.Bytes)
	if err != nil {
		return x509PublicKey{}, errors.New("failed to parse subject public key info")
	}
	return x509PublicKey{N: pk.N.String(), E: pk.E}, nil
}

// encodeJSON is v as JSON decodes it: maps, lists and float64s.
func encodeJSON(v any) (any, error) {
	buf := new(bytes.Buffer)
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		return nil, err
	}
	return out, nil
}
