package lib

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/sprout-gitops/sprout/celenv/celjson"
)

// Defaults and bounds of http.Get, Post and Put.
const (
	// DefaultHTTPTimeout bounds one request, within the evaluation's own
	// time limit.
	DefaultHTTPTimeout = 3 * time.Second
	// DefaultHTTPResponseBytes bounds one response body: it is parsed as
	// JSON, so it has json.unmarshal's bound.
	DefaultHTTPResponseBytes = MaxParseBytes
	// maxCABundleBytes bounds the PEM text http.Client takes.
	maxCABundleBytes = 256 << 10
	// maxHTTPRedirects bounds the redirects one request follows, each to an
	// allowed host.
	maxHTTPRedirects = 5
)

// HTTPOptions says what http.Get, Post and Put may reach. Egress is the
// operator's decision: with no AllowedHosts, every call fails.
type HTTPOptions struct {
	// AllowedHosts are the hosts calls may reach: a host name or IP
	// ("api.example.com"), with a port to allow that port only
	// ("api.example.com:8443"), or "*.example.com" for its subdomains.
	AllowedHosts []string
	// Timeout bounds each request; zero means DefaultHTTPTimeout.
	Timeout time.Duration
	// MaxResponseBytes bounds each response body; zero means
	// DefaultHTTPResponseBytes.
	MaxResponseBytes int
}

// HTTP makes the calls of http.Get, Post and Put, within its options. One
// serves every evaluation; Round gives the cache of one round of them.
type HTTP struct {
	opts   HTTPOptions
	client *http.Client
}

// NewHTTP checks opts and makes the client. An allowed host that is not a
// host name, an IP, host:port or *.domain is an error naming it.
func NewHTTP(opts HTTPOptions) (*HTTP, error) {
	for i, h := range opts.AllowedHosts {
		if err := checkAllowedHost(h); err != nil {
			return nil, fmt.Errorf("allowed hosts[%d] %q: %w", i, h, err)
		}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultHTTPTimeout
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultHTTPResponseBytes
	}
	h := &HTTP{opts: opts}
	h.client = h.newClient(nil)
	return h, nil
}

func checkAllowedHost(h string) error {
	name := strings.TrimPrefix(h, "*.")
	if host, port, err := net.SplitHostPort(name); err == nil {
		if port == "" || strings.Trim(port, "0123456789") != "" {
			return fmt.Errorf("the port must be a number")
		}
		name = host
	}
	if name == "" || strings.ContainsAny(name, "/*?#@ ") {
		return fmt.Errorf("want a host name, an IP, host:port or *.domain")
	}
	return nil
}

// newClient is a client that trusts roots (the system's when nil) and
// follows redirects only to allowed hosts.
func (h *HTTP) newClient(roots *x509.CertPool) *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxHTTPRedirects {
				return fmt.Errorf("more than %d redirects", maxHTTPRedirects)
			}
			return h.allowed(req.URL)
		},
	}
}

// allowed reports whether u may be called.
func (h *HTTP) allowed(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("the scheme %q is not http or https", u.Scheme)
	}
	host, port := u.Hostname(), u.Port()
	for _, a := range h.opts.AllowedHosts {
		if matchesHost(a, host, port) {
			return nil
		}
	}
	return fmt.Errorf("the host %q is not allowed (the operator allows hosts with --http-allowed-hosts)", u.Host)
}

func matchesHost(allowed, host, port string) bool {
	name, allowedPort := allowed, ""
	if h, p, err := net.SplitHostPort(allowed); err == nil {
		name, allowedPort = h, p
	}
	if allowedPort != "" && allowedPort != port {
		return false
	}
	if suffix, ok := strings.CutPrefix(name, "*."); ok {
		return strings.HasSuffix(strings.ToLower(host), "."+strings.ToLower(suffix))
	}
	return strings.EqualFold(name, host)
}

// Round is a cache of calls: the same request twice in a round is made
// once. A caller makes one round per sync, so a policy that asks the same
// URL for every trigger calls it once.
func (h *HTTP) Round() *HTTPRound {
	return &HTTPRound{http: h, results: map[string]httpResult{}}
}

// HTTPRound is one round's calls and their results.
type HTTPRound struct {
	http    *HTTP
	mu      sync.Mutex
	results map[string]httpResult
}

type httpResult struct {
	value any
	size  int
	err   error
}

// httpRequest is one call, as its cache key spells it.
type httpRequest struct {
	method, url string
	headers     map[string]string
	body        []byte
	caBundle    string
}

func (r httpRequest) key() string {
	var b strings.Builder
	b.WriteString(r.method + " " + r.url + "\n")
	for _, k := range slices.Sorted(mapKeys(r.headers)) {
		b.WriteString(k + ": " + r.headers[k] + "\n")
	}
	sum := sha256.Sum256(append(append([]byte(r.caBundle), 0), r.body...))
	b.Write(sum[:])
	return b.String()
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// do makes the call, or returns the round's earlier result for it.
func (r *HTTPRound) do(ctx context.Context, req httpRequest) httpResult {
	key := req.key()
	r.mu.Lock()
	res, ok := r.results[key]
	r.mu.Unlock()
	if ok {
		return res
	}
	res = r.http.call(ctx, req)
	if !errors.Is(res.err, context.Canceled) && !errors.Is(res.err, context.DeadlineExceeded) {
		// An evaluation that ran out of time says nothing of the next one's call.
		r.mu.Lock()
		r.results[key] = res
		r.mu.Unlock()
	}
	return res
}

func (h *HTTP) call(ctx context.Context, req httpRequest) httpResult {
	raw, status, err := h.fetch(ctx, req)
	if err != nil {
		return httpResult{err: err}
	}
	return httpResult{value: responseValue(raw, status), size: len(raw)}
}

// HTTPCall is one request made outside an evaluation: a
// GlobalContextEntry's apiCall, polled.
type HTTPCall struct {
	Method, URL string
	Headers     map[string]string
	Body        []byte // nil: none
	CABundle    string // PEM; "" trusts the system's roots
}

// Fetch makes call under the same rules as http.Get: allowed hosts only,
// the timeout and the response-size limit. It returns the body and the
// status code.
func (h *HTTP) Fetch(ctx context.Context, call HTTPCall) ([]byte, int, error) {
	return h.fetch(ctx, httpRequest{method: call.Method, url: call.URL, headers: call.Headers, body: call.Body, caBundle: call.CABundle})
}

func (h *HTTP) fetch(ctx context.Context, req httpRequest) ([]byte, int, error) {
	u, err := url.Parse(req.url)
	if err != nil {
		return nil, 0, err
	}
	if err := h.allowed(u); err != nil {
		return nil, 0, err
	}
	client := h.client
	if req.caBundle != "" {
		roots := x509.NewCertPool()
		if len(req.caBundle) > maxCABundleBytes || !roots.AppendCertsFromPEM([]byte(req.caBundle)) {
			return nil, 0, fmt.Errorf("http.Client: the CA bundle is not PEM certificates of at most %d bytes", maxCABundleBytes)
		}
		client = h.newClient(roots)
	}
	ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, req.url, body)
	if err != nil {
		return nil, 0, err
	}
	for k, v := range req.headers {
		hr.Header.Add(k, v)
	}
	resp, err := client.Do(hr)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, int64(h.opts.MaxResponseBytes)+1))
	if err != nil {
		return nil, 0, err
	}
	if len(raw) > h.opts.MaxResponseBytes {
		return nil, 0, fmt.Errorf("the response has more than %d bytes", h.opts.MaxResponseBytes)
	}
	return raw, resp.StatusCode, nil
}

// responseValue is what a call returns, as in Kyverno: a JSON object with
// statusCode added, or {"body": the JSON value, "statusCode": code}; a body
// that is not JSON reads as null.
func responseValue(raw []byte, status int) any {
	var body any
	if json.Unmarshal(raw, &body) != nil {
		body = nil
	}
	if m, ok := body.(map[string]any); ok {
		m["statusCode"] = float64(status)
		return m
	}
	return map[string]any{"body": body, "statusCode": float64(status)}
}

// httpType is the CEL type of the http variable and of what http.Client returns.
var httpType = cel.OpaqueType("http.Context")

// httpCalls is the value bound to http for one evaluation.
type httpCalls struct {
	ctx      context.Context
	round    *HTTPRound // nil: no host is allowed
	caBundle string
	used     *bool // set by the first call: the result is not reproducible
}

func (c *httpCalls) call(method string, args []ref.Val) ref.Val {
	*c.used = true
	rawURL := string(args[0].(types.String))
	name := "http." + method[:1] + strings.ToLower(method[1:])
	req := httpRequest{method: method, url: rawURL, caBundle: c.caBundle}
	if method != http.MethodGet {
		data, err := celjson.Convert(args[1])
		if err == nil {
			req.body, err = json.Marshal(data)
		}
		if err != nil {
			return types.NewErr("%s(%q): the body: %v", name, rawURL, err)
		}
		args = args[1:]
	}
	if len(args) == 2 {
		headers, err := stringMap(args[1])
		if err != nil {
			return types.NewErr("%s(%q): headers: %v", name, rawURL, err)
		}
		req.headers = headers
	}
	if c.round == nil {
		return types.NewErr("%s(%q): no host is allowed (the operator allows hosts with --http-allowed-hosts)", name, rawURL)
	}
	res := c.round.do(c.ctx, req)
	if res.err != nil {
		return types.NewErr("%s(%q): %v", name, rawURL, res.err)
	}
	return types.DefaultTypeAdapter.NativeToValue(res.value)
}

// stringMap reads a CEL map of strings.
func stringMap(v ref.Val) (map[string]string, error) {
	m, ok := v.(traits.Mapper)
	if !ok {
		return nil, fmt.Errorf("want a map of strings")
	}
	out := map[string]string{}
	it := m.Iterator()
	for it.HasNext() == types.True {
		k := it.Next()
		s, ok := m.Get(k).(types.String)
		if !ok {
			return nil, fmt.Errorf("the value of %v is not a string", k.Value())
		}
		out[fmt.Sprint(k.Value())] = string(s)
	}
	return out, nil
}

// httpLibrary declares Kyverno's http library, under Kyverno's spelling and
// in lower case as Sprout's other libraries allow:
//
//	http.Get(url[, headers]) -> dyn
//	http.Post(url, body[, headers]) -> dyn     // body sent as JSON
//	http.Put(url, body[, headers]) -> dyn
//	http.Client(caBundle).Get(…)               // trusting the PEM bundle
//
// A response is its JSON object with statusCode added, or
// {"body": value, "statusCode": code}. Only the operator's AllowedHosts can
// be reached; a failure is the trigger's error.
func httpLibrary() cel.EnvOption {
	bind := func(method string) func(...ref.Val) ref.Val {
		return func(args ...ref.Val) ref.Val { return args[0].(*httpCalls).call(method, args[1:]) }
	}
	str, headers := cel.StringType, cel.MapType(cel.StringType, cel.StringType)
	opts := []cel.EnvOption{cel.Variable(varHTTP, httpType)}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
		upper := m[:1] + strings.ToLower(m[1:])
		for _, name := range []string{upper, strings.ToLower(m)} {
			id := "http_" + name
			var overloads []cel.FunctionOpt
			if m == http.MethodGet {
				overloads = append(overloads,
					cel.MemberOverload(id+"_string", []*cel.Type{httpType, str}, cel.DynType, cel.FunctionBinding(bind(m))),
					cel.MemberOverload(id+"_string_map", []*cel.Type{httpType, str, headers}, cel.DynType, cel.FunctionBinding(bind(m))))
			} else {
				overloads = append(overloads,
					cel.MemberOverload(id+"_string_dyn", []*cel.Type{httpType, str, cel.DynType}, cel.DynType, cel.FunctionBinding(bind(m))),
					cel.MemberOverload(id+"_string_dyn_map", []*cel.Type{httpType, str, cel.DynType, headers}, cel.DynType, cel.FunctionBinding(bind(m))))
			}
			opts = append(opts, cel.Function(name, overloads...))
		}
	}
	for _, name := range []string{"Client", "client"} {
		opts = append(opts, cel.Function(name, cel.MemberOverload("http_"+name+"_string",
			[]*cel.Type{httpType, str}, httpType,
			cel.BinaryBinding(func(c, ca ref.Val) ref.Val {
				calls := *c.(*httpCalls)
				calls.caBundle = string(ca.(types.String))
				return &calls
			}))))
	}
	return cel.Lib(utilityLibrary{compile: opts})
}

const varHTTP = "http"

var _ ref.Val = (*httpCalls)(nil)

func (c *httpCalls) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("http cannot be converted")
}
func (c *httpCalls) ConvertToType(t ref.Type) ref.Val {
	return types.NewErr("http cannot be converted to %s", t.TypeName())
}
func (c *httpCalls) Equal(other ref.Val) ref.Val { return types.Bool(c == other) }
func (c *httpCalls) Type() ref.Type              { return httpType }
func (c *httpCalls) Value() any                  { return c }
