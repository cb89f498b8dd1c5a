package lib_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/celenv/internal/celtest"
)

func TestRandom(t *testing.T) {
	for _, tc := range []struct{ expr, pattern string }{
		{`random()`, "[0-9a-z]{8}"},
		{`random.random()`, "[0-9a-z]{8}"},
		{`random("[A-Z0-9]{8}-[A-Z0-9]{4}-[A-Z0-9]{12}")`, "[A-Z0-9]{8}-[A-Z0-9]{4}-[A-Z0-9]{12}"},
		{`random.random("(dev|prod)-[a-f]+\\d?")`, `(dev|prod)-[a-f]+\d?`},
		{`random("x[^a-z]*y")`, "x[^a-z]*y"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			re := regexp.MustCompile("^(?:" + tc.pattern + ")$")
			seen := map[string]bool{}
			for range 20 {
				got, err := evalLib(t, tc.expr, time.Time{})
				if err != nil {
					t.Fatal(err)
				}
				s, _ := got.(string)
				if !re.MatchString(s) {
					t.Fatalf("%q does not match %s", s, tc.pattern)
				}
				seen[s] = true
			}
			if len(seen) < 2 {
				t.Errorf("20 calls gave one value, %v: not random", seen)
			}
		})
	}
	runLibCases(t, time.Time{}, []libCase{
		{name: "a bad pattern", expr: `random("[a-")`, wantErr: "random: error parsing regexp"},
		{name: "a pattern over the size limit", expr: `random("` + strings.Repeat("a", 2000) + `")`, wantErr: "the pattern has 2000 bytes, over the limit of 1024"},
		{name: "an output over the size limit", expr: `random("[a-z]{1000}[a-z]{1000}[a-z]{1000}[a-z]{1000}[a-z]{1000}")`, wantErr: "the string would be longer than 4096 bytes"},
		{name: "not a string", expr: `random(1)`, wantErr: "found no matching overload for 'random'"},
	})
}

// certificate returns a self-signed certificate for name, in PEM, with key.
func certificate(t *testing.T, name string, key any, public any) string {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), NotAfter: time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, public, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestX509Decode(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaCert := strings.ReplaceAll(certificate(t, "web.team.svc", rsaKey, &rsaKey.PublicKey), "\n", `\n`)
	ecCert := strings.ReplaceAll(certificate(t, "ec", ecKey, &ecKey.PublicKey), "\n", `\n`)
	decode := `x509.decode("` + rsaCert + `")`
	runLibCases(t, time.Time{}, []libCase{
		{name: "subject", expr: decode + `.Subject.CommonName`, want: "web.team.svc"},
		{name: "names", expr: decode + `.DNSNames`, want: []any{"web.team.svc"}},
		{name: "times as RFC 3339", expr: decode + `.NotAfter`, want: "2027-01-02T03:04:05Z"},
		{name: "flags", expr: `[` + decode + `.IsCA, ` + decode + `.BasicConstraintsValid]`, want: []any{true, true}},
		{name: "numbers as doubles", expr: `[` + decode + `.SerialNumber, ` + decode + `.KeyUsage]`, want: []any{42.0, 32.0}},
		{name: "the RSA key, modulus as text", expr: `[` + decode + `.PublicKey.E, ` + decode + `.PublicKey.N]`, want: []any{65537.0, rsaKey.N.String()}},
		{name: "not PEM", expr: `x509.decode("not a certificate")`, wantErr: "x509.decode: failed to decode PEM block"},
		{name: "not an RSA key", expr: `x509.decode("` + ecCert + `")`, wantErr: "x509.decode: the certificate's public key is ECDSA; only RSA keys can be decoded"},
	})
}

func TestListObjToMapAndPrefixedHashes(t *testing.T) {
	keys := `[{"name": "kyverno", "lfx": "mentorship"}, {"name": "kubernetes"}]`
	values := `[{"domain": "security"}, {"domain": "orchestration"}]`
	runLibCases(t, time.Time{}, []libCase{
		{name: "Kyverno's example", expr: `transform.listObjToMap(` + keys + `, ` + values + `, "name", "domain")`,
			want: map[string]any{"kyverno": "security", "kubernetes": "orchestration"}},
		{name: "the unprefixed spelling", expr: `listObjToMap(` + keys + `, ` + values + `, "name", "domain").kyverno`, want: "security"},
		{name: "lists of different lengths", expr: `listObjToMap(` + keys + `, [{"domain": "x"}], "name", "domain")`,
			wantErr: "the lists have 2 and 1 elements"},
		{name: "a key that is not a string", expr: `listObjToMap([{"name": 1}], [{"domain": "x"}], "name", "domain")`,
			wantErr: "keys[0].name must be a string"},
		{name: "a value without the field", expr: `listObjToMap([{"name": "a"}], [{"other": "x"}], "name", "domain")`,
			wantErr: "values[0] has no field domain"},
		{name: "hash.sha256 is sha256", expr: `hash.sha256("abc") == sha256("abc") && hash.sha1("abc") == sha1("abc") && hash.md5("abc") == md5("abc")`, want: true},
	})
}

// kyvernoFunctions is every function of Kyverno 1.19's CEL environment for
// generating policies, beyond the Kubernetes and cel-go libraries, with a
// call of it. Each either compiles in Sprout or is refused at compile time by
// a message that names it: never CEL's generic "no matching overload" or
// "undeclared reference".
var kyvernoFunctions = []struct {
	name, expr string
	supported  bool
}{
	{"generator.Apply", `generator.Apply("ns", [])`, true},
	{"generator.apply", `generator.apply("ns", [])`, true},
	{"resource.Get", `resource.Get("v1", "configmaps", "ns", "name")`, true},
	{"resource.Get by GVR", `resource.Get(resource.ToGVR("v1", "ConfigMap"), "ns", "name")`, true},
	{"resource.List", `resource.List("v1", "configmaps", "ns", {"app": "x"})`, true},
	{"resource.ToGVR", `resource.ToGVR("v1", "ConfigMap")`, true},
	{"resource.Post", `resource.Post("authorization.k8s.io/v1", "subjectaccessreviews", {"spec": {}})`, false},
	{"resource.Post", `resource.Post("v1", "configmaps", "ns", {"metadata": {"name": "x"}})`, false},
	{"resource.Get of subresources", `resource.Get("v1", "pods", "ns", "name", ["status"])`, false},
	{"http.Get", `http.Get("https://example.com")`, true},
	{"http.Get with headers", `http.Get("https://example.com", {"Authorization": "x"})`, true},
	{"http.Post", `http.Post("https://example.com", {}, {"Content-Type": "application/json"})`, true},
	{"http.Put", `http.Put("https://example.com", {})`, true},
	{"http.Client", `http.Client("ca").Get("https://example.com")`, true},
	{"globalContext.Get", `globalContext.Get("entry", "")`, true},
	{"globalContext.Get without projection", `globalContext.Get("entry")`, true},
	{"image.GetMetadata", `image.GetMetadata("nginx")`, false},
	{"parseImageReference", `parseImageReference("nginx").registry()`, true},
	{"image", `image("nginx").containsDigest()`, true},
	{"isImage", `isImage("nginx")`, true},
	{"identifierWithSeparator", `image("nginx").identifierWithSeparator()`, true},
	{"sha256", `sha256("a") + hash.sha256("a")`, true},
	{"sha1", `sha1("a") + hash.sha1("a")`, true},
	{"md5", `md5("a") + hash.md5("a")`, true},
	{"math.round", `math.round(1.25, 1)`, true},
	{"json.unmarshal", `json.unmarshal("{}")`, true},
	{"json.marshal", `json.marshal({})`, true},
	{"yaml.parse", `yaml.parse("a: 1")`, true},
	{"random", `random() + random("[a-z]") + random.random()`, true},
	{"x509.decode", `x509.decode("")`, true},
	{"time.now", `time.now()`, true},
	{"time.truncate", `time.truncate(time.now(), duration("1h"))`, true},
	{"time.toCron", `time.toCron(time.now())`, true},
	{"listObjToMap", `listObjToMap([], [], "a", "b")`, true},
	{"transform.listObjToMap", `transform.listObjToMap([], [], "a", "b")`, true},
	{"parseServiceAccount", `parseServiceAccount("system:serviceaccount:ns:sa").Name`, false},
}

func TestEveryKyvernoFunctionWorksOrIsNamed(t *testing.T) {
	for _, f := range kyvernoFunctions {
		t.Run(f.expr, func(t *testing.T) {
			err := celenv.Compile(celtest.ExprPolicy(f.expr, `"ok"`)).Err()
			if f.supported {
				if err != nil {
					t.Fatalf("%s should compile: %v", f.name, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s compiles, but Sprout does not provide it", f.name)
			}
			for _, generic := range []string{"no matching overload", "undeclared reference"} {
				if strings.Contains(err.Error(), generic) {
					t.Errorf("%s fails with CEL's generic %q: %v", f.name, generic, err)
				}
			}
			if !strings.Contains(err.Error(), f.name) || !strings.Contains(err.Error(), "spec.variables[0].expression") {
				t.Errorf("error %q does not name %s at its field", err, f.name)
			}
		})
	}
}
