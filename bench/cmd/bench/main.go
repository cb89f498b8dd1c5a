// Command bench measures Sprout against yardsticks (issue #10): it starts a
// fresh local control plane for each measurement, runs the real `sprout run`
// process and the baseline controller of bench/baseline against it, and
// measures in the same run, with the same parallelism, the rate at which a
// plain client writes the ConfigMaps sprout generates with create (a) and
// with server-side apply (b). Every throughput is
// reported as a ratio to (a), (b) and the baseline (c); the figures, ratios,
// targets and the machine go to a JSON file, and a table to stdout.
//
// The scenarios are issue #10's, in parts that share clusters (-scenarios
// picks parts): cold (1 cold generation, 3 no-op restart, 4 drift repair,
// 6 profiles), growth (7), steady (2 latency at a steady trigger rate),
// policies (5 many policies, 6), burst (8, with 9 its cost to the
// cluster, read from /proc of kube-apiserver and etcd) and issue #26's scale
// (10: ConfigMap triggers by the hundred thousand, CPU per event), and
// issue #43's tenants (11: a platform policy's latency while a tenant's
// policies attack). Sprout's profiles
// come from its --pprof-bind-address.
//
// Run it from the repository root (make bench): it builds cmd/sprout and
// bench/baseline and reads fixtures/zk-kafka-address.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// params are the benchmark's sizes and settings, recorded with the results.
type params struct {
	Namespaces        int     `json:"namespaces"`
	Rounds            int     `json:"coldRounds"`
	BurstSize         int     `json:"burstNamespaces"`
	SteadyRate        float64 `json:"steadyPerSecond"`
	SteadySeconds     float64 `json:"steadySeconds"`
	DriftSize         int     `json:"driftObjects"`
	Policies          int     `json:"policies"`
	PolicyNamespaces  int     `json:"policyNamespaces"`
	GrowthBase        int     `json:"growthNamespaces"`
	CPUProfileSeconds int     `json:"cpuProfileSeconds"`
	Parallel          int     `json:"parallel"`
	Workers           int     `json:"sproutWorkers"`
	ControllerQPS     float64 `json:"controllerQPS"`
	ControllerBurst   int     `json:"controllerBurst"`
	TimeoutSeconds    float64 `json:"timeoutSeconds"`
	Scenarios         string  `json:"scenarios"`
	// ScaleSizes are scenario 10's trigger counts, ascending.
	ScaleSizes      []int   `json:"scaleSizes"`
	ScaleNamespaces int     `json:"scaleNamespaces"`
	ScaleSeconds    float64 `json:"scaleSeconds"`
	ScaleRounds     int     `json:"scaleRounds"`
	// TenantsSeconds is how long scenario 11 creates triggers, alone and
	// attacked.
	TenantsSeconds float64 `json:"tenantsSeconds"`
	// SproutArgs are flags added to every `sprout run`, to measure a
	// setting against the default.
	SproutArgs []string `json:"sproutArgs,omitempty"`
}

// part is a part of the benchmark: the scenarios of issue #10 measured
// on the same clusters.
type part struct {
	name, scenarios string
	run             func(*bench, context.Context) error
}

// parts are the benchmark's parts, in the order they run.
var parts = []part{
	{"cold", "1, 3, 4, 6", (*bench).coldGeneration},
	{"growth", "7", (*bench).growth},
	{"steady", "2", (*bench).steadyLatency},
	{"policies", "5, 6", (*bench).manyPolicies},
	{"burst", "8, 9", (*bench).burst},
	{"scale", "10", (*bench).scale},
	{"tenants", "11", (*bench).tenants},
}

func main() {
	var p params
	var timeout, steady, scaleDuration, tenants time.Duration
	var scaleSizes string
	out := flag.String("out", "bench/results/latest.json", "where the JSON results are written")
	report := flag.String("report", "", "print the report of a results file written before, such as bench/results/latest.json, and run nothing")
	keep := flag.Bool("keep", false, "keep the temporary folder with the binaries, kubeconfigs, controller logs and profiles")
	flag.IntVar(&p.Namespaces, "namespaces", 10000, "scenarios 1, 3 and 7: how many Namespaces exist before the controller starts")
	flag.IntVar(&p.Rounds, "rounds", 3, "scenario 1: how many times (a), (b), the baseline and sprout each run, interleaved; the figures are the medians")
	flag.IntVar(&p.BurstSize, "burst", 10000, "scenario 8: how many Namespaces are created while the controller runs")
	flag.Float64Var(&p.SteadyRate, "steady-rate", 50, "scenario 2: Namespaces created per second")
	flag.DurationVar(&steady, "steady-duration", 60*time.Second, "scenario 2: how long Namespaces are created for")
	flag.IntVar(&p.DriftSize, "drift", 1000, "scenario 4: how many generated ConfigMaps are modified, then deleted (at most -namespaces)")
	flag.IntVar(&p.Policies, "policies", 50, "scenario 5: how many policies")
	flag.IntVar(&p.PolicyNamespaces, "policy-namespaces", 1000, "scenario 5: how many Namespaces each policy generates into")
	flag.IntVar(&p.GrowthBase, "growth-namespaces", 1000, "scenario 7: the small size whose CPU per object scenario 1's is compared with")
	flag.IntVar(&p.CPUProfileSeconds, "cpu-profile-seconds", 10, "scenario 6: how long sprout's CPU is profiled during scenario 1")
	flag.IntVar(&p.Parallel, "parallel", 16, "goroutines of the raw clients and workers of the baseline")
	flag.IntVar(&p.Workers, "workers", 16, "sprout run --workers (policies synced at once)")
	flag.Float64Var(&p.ControllerQPS, "controller-qps", 1000, "--kube-api-qps of sprout and the baseline")
	flag.IntVar(&p.ControllerBurst, "controller-burst", 2000, "--kube-api-burst of sprout and the baseline")
	flag.DurationVar(&timeout, "timeout", 5*time.Minute, "how long one measurement may wait for its objects")
	flag.StringVar(&scaleSizes, "scale-sizes", "1000,10000,100000", "scenario 10: how many trigger ConfigMaps exist before the controller starts, one size after the other")
	flag.IntVar(&p.ScaleRounds, "scale-rounds", 3, "scenario 10: how many times each controller runs at the sizes up to 10,000, interleaved; the figures are each one's median round by CPU per event")
	flag.IntVar(&p.ScaleNamespaces, "scale-namespaces", 10, "scenario 10: how many Namespaces the trigger ConfigMaps are spread over")
	flag.DurationVar(&scaleDuration, "scale-duration", 30*time.Second, "scenario 10: how long trigger ConfigMaps are created for at -steady-rate")
	flag.DurationVar(&tenants, "tenants-duration", 20*time.Second, "scenario 11: how long Namespaces are created at -steady-rate, alone and while a tenant attacks")
	var sproutArgs string
	flag.StringVar(&sproutArgs, "sprout-args", "", "flags added to every `sprout run`, separated by spaces, such as \"--policy-reports=false\"")
	flag.StringVar(&p.Scenarios, "scenarios", "cold,growth,steady,policies,burst,scale,tenants", "the parts to run: cold (scenarios 1, 3, 4, 6), growth (7), steady (2), policies (5, 6), burst (8, 9), scale (10), tenants (11)")
	flag.Parse()
	var err error
	if p.ScaleSizes, err = parseSizes(scaleSizes); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	p.SproutArgs = strings.Fields(sproutArgs)
	p.ScaleSeconds = scaleDuration.Seconds()
	p.SteadySeconds = steady.Seconds()
	p.TenantsSeconds = tenants.Seconds()
	p.TimeoutSeconds = timeout.Seconds()
	// envtest logs through controller-runtime's global logger.
	ctrllog.SetLogger(logr.Discard())
	// envtest gives kube-apiserver 20 seconds to start, too few on a loaded
	// machine after a cluster of thousands of objects was just stopped.
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		_ = os.Setenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "2m")
	}

	if *report != "" {
		if err := printReport(*report); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, p, timeout, *out, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// printReport prints the report of the results in file, judged again.
func printReport(file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var r result
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	r.Targets = nil
	r.judge()
	r.print(os.Stdout)
	return nil
}

func run(ctx context.Context, p params, timeout time.Duration, out string, keep bool) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("run from the repository root: %w", err)
	}
	tmp, err := os.MkdirTemp("", "sprout-bench-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(os.Stderr, "bench: keeping", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	b := &bench{params: p, timeout: timeout, tmp: tmp}
	if err := b.build(ctx); err != nil {
		return err
	}
	b.res.Machine = machine()
	b.res.Params = p
	b.res.Started = time.Now().UTC()
	start := time.Now()
	selected := strings.Split(p.Scenarios, ",")
	for _, name := range selected {
		if !slices.ContainsFunc(parts, func(pt part) bool { return pt.name == name }) {
			return fmt.Errorf("-scenarios: no part %q", name)
		}
	}
	for _, pt := range parts {
		if !slices.Contains(selected, pt.name) {
			continue
		}
		began := time.Now()
		if err := pt.run(b, ctx); err != nil {
			return fmt.Errorf("%s: %w (logs in %s; -keep keeps them)", pt.name, err, tmp)
		}
		b.res.Scenarios = append(b.res.Scenarios, scenarioTime{pt.name, pt.scenarios, time.Since(began).Seconds()})
		logf("%s (scenarios %s) took %.0f s", pt.name, pt.scenarios, time.Since(began).Seconds())
	}
	b.res.Seconds = time.Since(start).Seconds()
	b.res.judge()
	raw, err := json.MarshalIndent(b.res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(out, append(raw, '\n'), 0o644); err != nil {
		return err
	}
	b.res.print(os.Stdout)
	fmt.Fprintln(os.Stderr, "bench: results in", out)
	return nil
}

// bench holds the binaries under test and the results so far.
type bench struct {
	params
	timeout  time.Duration
	tmp      string
	sprout   string
	baseline string
	res      result
	// baselineFirst is when the baseline's first copy came in scenario
	// 10's last run of it: how long sprout's start-up is profiled.
	baselineFirst float64
}

// buildFlags are how the image and `make build` build sprout (the
// Makefile's SPROUT_BUILD_FLAGS, with CGO_ENABLED=0); the baseline is built
// the same way, so that neither's memory counts what the other's build
// leaves out.
var buildFlags = []string{"-trimpath", "-ldflags", "-s -w"}

// build builds the sprout and baseline binaries as the image does.
func (b *bench) build(ctx context.Context) error {
	b.sprout, b.baseline = filepath.Join(b.tmp, "sprout"), filepath.Join(b.tmp, "baseline")
	for bin, pkg := range map[string]string{b.sprout: "./cmd/sprout", b.baseline: "./bench/baseline"} {
		cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, buildFlags...), "-o", bin, pkg)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	}
	return nil
}

// withCluster runs fn against a fresh control plane, stopped afterwards, so
// that no measurement inherits another's objects.
func (b *bench) withCluster(name string, fn func(c *cluster, dir string) error) error {
	dir := filepath.Join(b.tmp, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	c, err := newCluster(dir)
	if err != nil {
		return err
	}
	defer c.close()
	return fn(c, dir)
}

func (b *bench) sproutArgs() []string {
	return append([]string{"--workers", fmt.Sprint(b.Workers), "--kube-api-qps", fmt.Sprint(b.ControllerQPS), "--kube-api-burst", fmt.Sprint(b.ControllerBurst)}, b.SproutArgs...)
}

func (b *bench) baselineArgs() []string {
	return []string{"--workers", fmt.Sprint(b.Parallel), "--kube-api-qps", fmt.Sprint(b.ControllerQPS), "--kube-api-burst", fmt.Sprint(b.ControllerBurst)}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
