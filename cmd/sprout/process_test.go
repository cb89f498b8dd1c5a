package main

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/internal/syncbuf"
)

var (
	buildOnce sync.Once
	binaryDir string // removed by TestMain
	binary    string
	buildErr  error
)

// TestMain removes the folder sproutBinary built into, which would
// otherwise stay in the temporary folder after every run.
func TestMain(m *testing.M) {
	code := m.Run()
	if binaryDir != "" {
		if err := os.RemoveAll(binaryDir); err != nil {
			log.Printf("remove the sprout binary: %v", err)
		}
	}
	os.Exit(code)
}

// sproutBinary builds the sprout command once per test run, for tests that
// need separate processes.
func sproutBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sprout-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binaryDir = dir
		binary = filepath.Join(dir, "sprout")
		out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
		if err != nil {
			buildErr = err
			binary = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, binary)
	}
	return binary
}

// apiProxy stands between sprout processes and the API server: it counts
// their write requests (dry runs are not writes) on the server's side of
// the wire, and can hold back
// requests whose path contains a string until released. Tests of faults
// count every request and answer in place of the API server (fault).
type apiProxy struct {
	server *httptest.Server
	writes atomic.Int64
	mu     sync.Mutex
	seen   []string
	held   string
	gate   chan struct{}

	// requests counts every request, reads and watches included.
	requests atomic.Int64
	// conflicts counts the answers 409 Conflict.
	conflicts atomic.Int64
	// fault, when set, serves each request in place of the plain
	// forwarding, which it is handed.
	fault atomic.Pointer[fault]
}

// newAPIProxy fronts the API server of cfg on a loopback address.
func newAPIProxy(t *testing.T, cfg *rest.Config) *apiProxy {
	t.Helper()
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	// An API server that is down is a test's doing: the client gets 502
	// Bad Gateway, the test log no line per request.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	p := &apiProxy{gate: make(chan struct{})}
	close(p.gate)
	p.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		p.mu.Lock()
		held, gate := p.held, p.gate
		p.mu.Unlock()
		if held != "" && strings.Contains(r.URL.Path, held) {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		// Lease renewals are the price of leader election, not a write of
		// Sprout's, a dry run changes nothing, and an access review or the
		// question of who Sprout is (a SelfSubjectReview, asked by the new
		// leader) stores nothing; everything else counts.
		if r.Method != http.MethodGet && !strings.Contains(r.URL.Path, "/leases") && !r.URL.Query().Has("dryRun") &&
			!strings.HasPrefix(r.URL.Path, "/apis/authorization.k8s.io/") && !strings.HasSuffix(r.URL.Path, "/selfsubjectreviews") {
			p.writes.Add(1)
			p.mu.Lock()
			p.seen = append(p.seen, r.Method+" "+controlplane.ObjectPath(r))
			p.mu.Unlock()
		}
		rec := &statusRecorder{ResponseWriter: w}
		if f := p.fault.Load(); f != nil {
			(*f)(rec, r, rp)
		} else {
			rp.ServeHTTP(rec, r)
		}
		if rec.code == http.StatusConflict {
			p.conflicts.Add(1)
		}
	}))
	t.Cleanup(p.server.Close)
	return p
}

// fault serves a request at the proxy in place of forward, the plain
// forwarding to the API server, which it may call.
type fault func(w http.ResponseWriter, r *http.Request, forward http.Handler)

// statusRecorder notes the status of an answer; Unwrap lets the reverse
// proxy flush watch events through it.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// hold holds back requests whose path contains s until the returned
// function is called.
func (p *apiProxy) hold(s string) (release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held, p.gate = s, make(chan struct{})
	gate := p.gate
	return sync.OnceFunc(func() { close(gate) })
}

// reset forgets the writes counted so far.
func (p *apiProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writes.Store(0)
	p.conflicts.Store(0)
	p.seen = nil
}

func (p *apiProxy) written() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// kubeconfig writes a kubeconfig that reaches the API server through the proxy.
func (p *apiProxy) kubeconfig(t *testing.T) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.server.URL}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// process is a sprout process started by a test.
type process struct {
	cmd  *exec.Cmd
	logs *syncbuf.Buffer
	done chan error
}

// startProcess runs `sprout run` with args, probes and metrics on loopback
// ports the process picks itself; it is killed when the test ends if still
// running.
func startProcess(t *testing.T, kubeconfig string, args ...string) *process {
	t.Helper()
	p := &process{logs: &syncbuf.Buffer{}, done: make(chan error, 1)}
	// A port picked here and closed before sprout binds it may be taken by
	// another test meanwhile: the kernel picks, and the log says which.
	p.cmd = exec.Command(sproutBinary(t), append([]string{"run", "--kubeconfig", kubeconfig,
		"--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done //nolint:errcheck // killed: how it ended is not news
		if t.Failed() {
			t.Logf("sprout %v:\n%s", p.cmd.Args[1:], p.logs.String())
		}
	})
	return p
}

// servingAt matches the line sprout logs once a server listens.
var servingAt = regexp.MustCompile(`msg="serving (\w+)" address=http://(\S+)`)

// serving returns the address sprout logged it serves what ("probes",
// "metrics") on, or "" before it has.
func (p *process) serving(what string) string {
	for _, m := range servingAt.FindAllStringSubmatch(p.logs.String(), -1) {
		if m[1] == what {
			return m[2]
		}
	}
	return ""
}

// probes is the address of /healthz and /readyz, "" until sprout serves them.
func (p *process) probes() string { return p.serving("probes") }

// metric is the address of /metrics, "" until sprout serves it.
func (p *process) metric() string { return p.serving("metrics") }

// get returns the status code and body of a path on one of the process's
// servers, or 0 when it does not answer or is not yet serving.
func (p *process) get(ctx context.Context, addr, path string) (int, string) {
	if addr == "" {
		return 0, ""
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// exited waits up to limit for the process to exit and returns its error.
func (p *process) exited(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(limit):
		t.Fatalf("sprout did not exit within %s", limit)
		return nil
	}
}

// stop sends SIGTERM and waits for the process to exit.
func (p *process) stop(t *testing.T, within time.Duration) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return p.exited(t, within)
}

// eventually polls cond for up to 30 seconds.
func eventually(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
