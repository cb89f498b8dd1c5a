package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go runs on.
const clockTicks = 100

// process is a controller under test: sprout or the baseline.
type process struct {
	cmd     *exec.Cmd
	done    chan error
	started time.Time
	metrics string
	probes  string
	pprof   string
	stopped sync.Once
}

// startSprout runs `sprout run` with its servers on free loopback ports.
func startSprout(bin, kubeconfig, logPath string, args ...string) (*process, error) {
	addrs, err := freeAddresses(3)
	if err != nil {
		return nil, err
	}
	p := &process{metrics: addrs[0], probes: addrs[1], pprof: addrs[2]}
	args = append([]string{"run", "--kubeconfig", kubeconfig, "--metrics-bind-address", p.metrics,
		"--health-probe-bind-address", p.probes, "--pprof-bind-address", p.pprof}, args...)
	return p, p.start(bin, logPath, args...)
}

// startBaseline runs the baseline controller.
func startBaseline(bin, kubeconfig, logPath string, args ...string) (*process, error) {
	p := &process{}
	return p, p.start(bin, logPath, append([]string{"--kubeconfig", kubeconfig}, args...)...)
}

func (p *process) start(bin, logPath string, args ...string) error {
	logs, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logs, logs
	p.done = make(chan error, 1)
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		logs.Close()
		return err
	}
	go func() { p.done <- p.cmd.Wait(); logs.Close() }()
	return nil
}

// stop sends SIGTERM and waits up to 30 seconds, then kills.
// Only its first call does.
func (p *process) stop() {
	p.stopped.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-p.done:
			_ = err // it was asked to stop: how it ended is not a failure
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done //nolint:errcheck // killed: how it ended is not news
		}
	})
}

// cpuSeconds is the user and system CPU time the process used so far.
func (p *process) cpuSeconds() float64 { return cpuSeconds(p.cmd.Process.Pid) }

// peakRSSMiB is the process's peak resident set size (VmHWM).
func (p *process) peakRSSMiB() float64 { return peakRSSMiB(p.cmd.Process.Pid) }

// cpuSeconds is the user and system CPU time process pid used so far, or
// -1 if it cannot be read.
func cpuSeconds(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name may hold spaces: fields count from the last ')'.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return -1
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / clockTicks
}

// peakRSSMiB is the peak resident set size (VmHWM) of process pid, or -1
// if it cannot be read.
func peakRSSMiB(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return -1
}

// ready reports whether sprout's /readyz answers 200.
func (p *process) ready(ctx context.Context) bool {
	code, _ := httpGet(ctx, "http://"+p.probes+"/readyz")
	return code == http.StatusOK
}

// metricSum adds up the samples of a sprout metric whose line starts with prefix.
func (p *process) metricSum(ctx context.Context, prefix string) float64 {
	_, body := httpGet(ctx, "http://"+p.metrics+"/metrics")
	var sum float64
	for line := range strings.SplitSeq(body, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// syncModes reads how many full and incremental syncs sprout has run.
func (p *process) syncModes(ctx context.Context) (full, incremental float64) {
	return p.metricSum(ctx, `sprout_syncs_total{mode="full"`), p.metricSum(ctx, `sprout_syncs_total{mode="incremental"`)
}

// phases reads the mean duration of each phase of sprout's syncs.
func (p *process) phases(ctx context.Context) []phase {
	var out []phase
	for _, name := range syncPhases {
		label := `{phase="` + name + `"}`
		n := p.metricSum(ctx, "sprout_reconcile_phase_duration_seconds_count"+label)
		sum := p.metricSum(ctx, "sprout_reconcile_phase_duration_seconds_sum"+label)
		ph := phase{Name: name, Syncs: int(n)}
		if n > 0 {
			ph.MeanMs = sum / n * 1000
		}
		out = append(out, ph)
	}
	return out
}

func httpGet(ctx context.Context, u string) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// pollUntil calls cond every 50 ms until it holds or timeout passes.
func pollUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cond()
}

// freeAddresses returns n free loopback addresses.
func freeAddresses(n int) ([]string, error) {
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// proxy stands between a controller and the API server and counts write
// requests on the server's side of the wire, as cmd/sprout's tests do:
// dry runs and Lease renewals are not writes, and access reviews, which
// store nothing, are counted apart.
type proxy struct {
	server  *http.Server
	url     string
	writes  atomic.Int64
	reviews atomic.Int64
	// firstReports counts creates of PolicyReports: reports the process
	// before this one still owed (its writer is bounded in rate and lags
	// generation), not rewrites. Every other write, a report updated
	// included, is in writes.
	firstReports atomic.Int64
	mu           sync.Mutex
	// written names the first writes, to tell what a restart wrote.
	written []string
}

// reportCreate reports whether r creates a PolicyReport or
// ClusterPolicyReport: a POST to their collection.
func reportCreate(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/apis/wgpolicyk8s.io/") &&
		(strings.HasSuffix(r.URL.Path, "/policyreports") || strings.HasSuffix(r.URL.Path, "/clusterpolicyreports"))
}

func newProxy(cfg *rest.Config) (*proxy, error) {
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{url: "http://" + ln.Addr().String()}
	p.server = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Access reviews and the review of who Sprout is store nothing.
		review := strings.HasPrefix(r.URL.Path, "/apis/authorization.k8s.io/") || strings.HasPrefix(r.URL.Path, "/apis/authentication.k8s.io/")
		if review {
			p.reviews.Add(1)
		}
		write := r.Method != http.MethodGet && !strings.Contains(r.URL.Path, "/leases") && !r.URL.Query().Has("dryRun") && !review
		// A create of a report cannot write one that exists (it would
		// conflict): it is a first write by definition. An update is
		// a write.
		if write && reportCreate(r) {
			p.firstReports.Add(1)
		} else if write {
			if p.writes.Add(1) <= 20 {
				p.mu.Lock()
				p.written = append(p.written, r.Method+" "+r.URL.Path)
				p.mu.Unlock()
			}
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.server.Serve(ln) }()
	return p, nil
}

func (p *proxy) close() { _ = p.server.Close() }

func (p *proxy) writeList() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.written...)
}

// kubeconfig writes a kubeconfig reaching the API server through the proxy.
func (p *proxy) kubeconfig(dir string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.url}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	path := filepath.Join(dir, "kubeconfig-proxy")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// logWatch reads a process's log as it grows, for a line that holds a
// message.
type logWatch struct {
	path, message string
	offset        int64
	tail          []byte // an unfinished line, read again with what follows
}

func newLogWatch(path, message string) *logWatch {
	w := &logWatch{path: path, message: message}
	if fi, err := os.Stat(path); err == nil {
		w.offset = fi.Size() // only lines written from now on
	}
	return w
}

// seen reports whether a line written since the watch began holds the
// message.
func (w *logWatch) seen() bool {
	f, err := os.Open(w.path)
	if err != nil {
		return false
	}
	defer f.Close()
	buf, err := io.ReadAll(io.NewSectionReader(f, w.offset, 1<<40))
	if err != nil {
		return false
	}
	w.offset += int64(len(buf))
	buf = append(w.tail, buf...)
	end := bytes.LastIndexByte(buf, '\n') + 1
	w.tail = slices.Clone(buf[end:])
	return bytes.Contains(buf[:end], []byte(w.message))
}
