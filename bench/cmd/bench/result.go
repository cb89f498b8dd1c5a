package main

import (
	"cmp"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// result is what latest.json holds. A scenario that did not run (-scenarios)
// keeps its zero value and has no targets.
type result struct {
	Machine machineInfo `json:"machine"`
	Params  params      `json:"params"`
	Started time.Time   `json:"started"`
	Seconds float64     `json:"seconds"`
	// Scenarios are the parts that ran and how long each took, clusters
	// included, for choosing sizes that fit the time at hand.
	Scenarios []scenarioTime `json:"scenarios"`
	Cold      cold           `json:"coldGeneration"`
	Restart   restart        `json:"noopRestart"`
	Drift     drift          `json:"driftRepair"`
	// Growth is scenario 1's sprout run at GrowthBase Namespaces (7).
	Growth   controllerRun `json:"growth"`
	Steady   steady        `json:"steadyLatency"`
	Policies manyPolicies  `json:"manyPolicies"`
	Burst    burst         `json:"burst"`
	Scale    []scaleSize   `json:"scale"`
	Tenants  tenantsResult `json:"tenants"`
	Profiles profiles      `json:"profiles"`
	Targets  []target      `json:"targets"`
}

// scenarioTime is how long one part of the benchmark took.
type scenarioTime struct {
	Name      string  `json:"name"`
	Scenarios string  `json:"scenarios"`
	Seconds   float64 `json:"seconds"`
}

type machineInfo struct {
	Cores     int    `json:"cores"`
	CPU       string `json:"cpu"`
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
	// LoadAverage is /proc/loadavg at the start: other work on the machine
	// skews absolute figures, not the ratios measured in the same run.
	LoadAverage string `json:"loadAverage"`
}

// rate is a count of objects over a duration.
type rate struct {
	Objects   int     `json:"objects"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"perSecond"`
	// ClusterCPUSeconds is the CPU time kube-apiserver and etcd spent
	// meanwhile (scenarios 1 and 4): on this machine's two cores it is
	// most of what bounds every writer's rate.
	ClusterCPUSeconds float64 `json:"clusterCPUSeconds,omitempty"`
}

// clusterMsPerObject is the control plane's CPU time per object.
func (r rate) clusterMsPerObject() float64 {
	return 1000 * ratio(r.ClusterCPUSeconds, float64(r.Objects))
}

func rateOf(n int, d time.Duration) rate {
	r := rate{Objects: n, Seconds: d.Seconds()}
	if d > 0 {
		r.PerSecond = float64(n) / d.Seconds()
	}
	return r
}

// latency summarises durations, in milliseconds.
type latency struct {
	Count int     `json:"count"`
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
}

// latencyOf takes the nearest-rank percentiles of ds.
func latencyOf(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := max(int(math.Ceil(q*float64(len(s))))-1, 0)
		return float64(s[i]) / float64(time.Millisecond)
	}
	return latency{Count: len(s), P50Ms: at(0.5), P99Ms: at(0.99), MaxMs: at(1)}
}

// ratios compare a throughput with the yardsticks (a), (b) and (c).
type ratios struct {
	RawCreate float64 `json:"vsRawCreate"`
	RawApply  float64 `json:"vsRawApply"`
	Baseline  float64 `json:"vsBaseline,omitempty"`
	// PlainCreate and PlainApply compare with the first round's writes of
	// plain ConfigMaps, without sprout's labels and annotations.
	PlainCreate float64 `json:"vsPlainCreate,omitempty"`
	PlainApply  float64 `json:"vsPlainApply,omitempty"`
}

// controllerRun is one controller process generating ConfigMaps.
type controllerRun struct {
	rate
	Expected int `json:"expected"`
	// FirstSeconds is when the first object was seen: the start-up cost.
	FirstSeconds float64 `json:"firstSeconds"`
	// SteadyPerSecond is the rate from the first object to the last.
	SteadyPerSecond float64 `json:"steadyPerSecond"`
	// CPUSeconds is the process's CPU time when the last object was seen.
	CPUSeconds float64 `json:"cpuSeconds"`
	PeakRSSMiB float64 `json:"peakRSSMiB"`
	Ratios     ratios  `json:"ratios"`
}

// cpuMsPerObject is the process's CPU time per object seen.
func (r controllerRun) cpuMsPerObject() float64 {
	return 1000 * ratio(r.CPUSeconds, float64(r.Objects))
}

// cold is scenario 1: the median of each measurement over the rounds, and
// every round.
type cold struct {
	Namespaces      int  `json:"namespaces"`
	NamespaceCreate rate `json:"namespaceCreate"`
	coldRound
	EachRound []coldRound `json:"eachRound"`
}

// peakRSSMiB is sprout's highest peak RSS in any round.
func (c *cold) peakRSSMiB() float64 {
	var m float64
	for _, r := range c.EachRound {
		m = max(m, r.Sprout.PeakRSSMiB)
	}
	return m
}

// coldRound is one run of each of scenario 1's measurements, one after
// the other.
type coldRound struct {
	// RawCreate (a) and RawApply (b) write the ConfigMaps sprout generates.
	RawCreate rate `json:"rawCreate"`
	RawApply  rate `json:"rawApply"`
	// PlainCreate and PlainApply, in the first round only, write them
	// without sprout's labels and annotations.
	PlainCreate *rate         `json:"plainCreate,omitempty"`
	PlainApply  *rate         `json:"plainApply,omitempty"`
	Baseline    controllerRun `json:"baseline"`
	Sprout      controllerRun `json:"sprout"`
	// RestartFirstSeconds and BaselineRestartFirstSeconds are scenario 3's
	// first copy after a restart on this round's clusters.
	RestartFirstSeconds         float64 `json:"restartFirstSeconds,omitempty"`
	BaselineRestartFirstSeconds float64 `json:"baselineRestartFirstSeconds,omitempty"`
}

// median sets each of c's measurements to its median round by objects per
// second: a whole run, so that its CPU time, RSS and start-up stay those of
// one process.
func (c *cold) median() {
	if len(c.EachRound) == 0 {
		return
	}
	pick := func(get func(coldRound) float64) coldRound {
		rs := slices.Clone(c.EachRound)
		slices.SortStableFunc(rs, func(x, y coldRound) int { return cmp.Compare(get(x), get(y)) })
		return rs[len(rs)/2]
	}
	c.RawCreate = pick(func(r coldRound) float64 { return r.RawCreate.PerSecond }).RawCreate
	c.RawApply = pick(func(r coldRound) float64 { return r.RawApply.PerSecond }).RawApply
	c.Baseline = pick(func(r coldRound) float64 { return r.Baseline.PerSecond }).Baseline
	c.Sprout = pick(func(r coldRound) float64 { return r.Sprout.PerSecond }).Sprout
	c.PlainCreate, c.PlainApply = c.EachRound[0].PlainCreate, c.EachRound[0].PlainApply
}

// restartFirst is the median of the rounds' first copies after a restart,
// sprout's and the baseline's, each on its own.
func (c *cold) restartFirst() (sprout, baseline float64) {
	var s, b []float64
	for _, r := range c.EachRound {
		s, b = append(s, r.RestartFirstSeconds), append(b, r.BaselineRestartFirstSeconds)
	}
	if len(s) == 0 {
		return 0, 0
	}
	slices.Sort(s)
	slices.Sort(b)
	return s[len(s)/2], b[len(b)/2]
}

type restart struct {
	Objects    int      `json:"objects"`
	Unchanged  int      `json:"unchanged"`
	Writes     int64    `json:"writes"`
	WritesSeen []string `json:"writesSeen,omitempty"`
	Seconds    float64  `json:"seconds"`
	CPUSeconds float64  `json:"cpuSeconds"`
	PeakRSSMiB float64  `json:"peakRSSMiB"`
	// ResyncCPUSeconds and ResyncWrites are those of the scheduled full
	// resync that follows the restart.
	ResyncCPUSeconds float64 `json:"resyncCPUSeconds"`
	ResyncWrites     int64   `json:"resyncWrites"`
	// OwedReports and ResyncOwedReports count first writes of PolicyReports
	// that did not exist: the process before had not written them yet (its
	// report writer is bounded in rate). Writes and ResyncWrites hold every
	// other write, a report written again included.
	OwedReports       int64 `json:"owedReports"`
	ResyncOwedReports int64 `json:"resyncOwedReports"`
	// FirstSeconds and BaselineFirstSeconds are the time from the start
	// of a controller, sprout's and the baseline's, on a cluster holding
	// every copy of the cold scenario (and sprout's record of them), to
	// the copy for a Namespace created while it was stopped: the medians
	// of the cold rounds'.
	FirstSeconds         float64 `json:"firstSeconds,omitempty"`
	BaselineFirstSeconds float64 `json:"baselineFirstSeconds,omitempty"`
}

// drift is scenario 4: how fast each controller puts back what was changed
// behind its back.
type drift struct {
	Objects  int       `json:"objects"`
	Baseline repairRun `json:"baseline"`
	Sprout   repairRun `json:"sprout"`
}

type repairRun struct {
	Modified repair `json:"modified"`
	Deleted  repair `json:"deleted"`
}

// repair is how many objects were put back, and how long after the first
// was broken the last was seen right.
type repair struct {
	rate
	Expected int `json:"expected"`
	// Writes are the controller's writes from the first break until 2 s
	// after the last repair, counted at a proxy; -1 when not counted.
	Writes int64 `json:"writes"`
}

// steady is scenario 2: triggers at a steady rate, the latency of each.
type steady struct {
	Baseline latencyRun `json:"baseline"`
	Sprout   latencyRun `json:"sprout"`
}

type latencyRun struct {
	Triggers int `json:"triggers"`
	// Seen is how many of their ConfigMaps were seen; Latency counts only those.
	Seen       int     `json:"seen"`
	Latency    latency `json:"latency"`
	CPUSeconds float64 `json:"cpuSeconds"`
	PeakRSSMiB float64 `json:"peakRSSMiB"`
	// Phases is, for sprout, how long each phase of a sync took on average
	// (sprout_reconcile_phase_duration_seconds): what a trigger waits for.
	Phases []phase `json:"phases,omitempty"`
	// FullSyncs and IncrementalSyncs are, for sprout, the syncs it ran by
	// mode (sprout_syncs_total) during the measurement.
	FullSyncs        int `json:"fullSyncs,omitempty"`
	IncrementalSyncs int `json:"incrementalSyncs,omitempty"`
}

// phase is the mean duration of one phase of sprout's syncs.
type phase struct {
	Name   string  `json:"name"`
	Syncs  int     `json:"syncs"`
	MeanMs float64 `json:"meanMs"`
}

// syncPhases are the phases of a sync, in order.
var syncPhases = []string{"match", "evaluate", "record", "apply", "prune", "report"}

// manyPolicies is scenario 5.
type manyPolicies struct {
	Policies   int           `json:"policies"`
	Namespaces int           `json:"namespaces"`
	Sprout     controllerRun `json:"sprout"`
}

// burst is scenario 8, with the cost to the cluster (9) for each controller.
type burst struct {
	Namespaces int      `json:"namespaces"`
	Baseline   burstRun `json:"baseline"`
	Sprout     burstRun `json:"sprout"`
}

type burstRun struct {
	controllerRun
	// CreateSeconds is how long the client took to create the Namespaces.
	CreateSeconds float64 `json:"createSeconds"`
	// Create is the latency of the Namespaces' Create calls.
	Create latency `json:"createLatency"`
	// APIServerCPUSeconds and EtcdCPUSeconds are the control plane's CPU
	// time from the first create until 2 s after the last ConfigMap: the
	// creates, the watch that counts, and the controller's requests.
	APIServerCPUSeconds float64 `json:"apiServerCPUSeconds"`
	EtcdCPUSeconds      float64 `json:"etcdCPUSeconds"`
}

// apiServerMsPerObject is the API server's CPU time per generated object.
func (r burstRun) apiServerMsPerObject() float64 {
	return 1000 * ratio(r.APIServerCPUSeconds, float64(r.Objects))
}

func (r burstRun) etcdMsPerObject() float64 {
	return 1000 * ratio(r.EtcdCPUSeconds, float64(r.Objects))
}

// profiles are scenario 6's profiles of sprout.
type profiles struct {
	// ColdCPU is a CPU profile taken while sprout generates in scenario 1.
	ColdCPU *profileSummary `json:"coldCPU,omitempty"`
	// SteadyCPU is a CPU profile taken during scenario 2, of the same length.
	SteadyCPU *profileSummary `json:"steadyCPU,omitempty"`
	// ScaleCPU is one taken during scenario 10's steady creation at its
	// largest size.
	ScaleCPU *profileSummary `json:"scaleCPU,omitempty"`
	// StartCPU is one taken from sprout's start at scenario 10's largest
	// size, as long as the baseline took to its first copy (a second at
	// least): what sprout's first copy waits for.
	StartCPU *profileSummary `json:"startCPU,omitempty"`
	// ScaleAllocs is what was allocated during that CPU profile: the
	// garbage whose collection is most of the CPU at a large heap.
	ScaleAllocs *profileSummary `json:"scaleAllocs,omitempty"`
	// ColdHeap and PoliciesHeap are what is in use at the end of scenarios
	// 1 and 5, after a garbage collection; the Allocs are all that was
	// allocated until then, the garbage that drives peak RSS and GC CPU.
	ColdHeap       *profileSummary `json:"coldHeap,omitempty"`
	ColdAllocs     *profileSummary `json:"coldAllocs,omitempty"`
	PoliciesHeap   *profileSummary `json:"manyPoliciesHeap,omitempty"`
	PoliciesAllocs *profileSummary `json:"manyPoliciesAllocs,omitempty"`
}

// target is one of issue #10's goals and whether this run met it.
type target struct {
	Figure string `json:"figure"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Met    bool   `json:"met"`
}

func machine() machineInfo {
	m := machineInfo{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAverage = strings.Join(strings.Fields(string(raw))[:3], " ")
	}
	return m
}

func ratio(x, of float64) float64 {
	if of == 0 {
		return 0
	}
	return x / of
}

// ran tells whether the part of the benchmark named name ran.
func (r *result) ran(name string) bool {
	return slices.ContainsFunc(r.Scenarios, func(s scenarioTime) bool { return s.Name == name })
}

// scaleSize is scenario 10 at one size: each controller's median round,
// and every round.
type scaleSize struct {
	Triggers int `json:"triggers"`
	scaleRound
	EachRound []scaleRound `json:"eachRound"`
}

// scaleRound is one run of each controller at one size, one after the
// other.
type scaleRound struct {
	Baseline scaleRun `json:"baseline"`
	Sprout   scaleRun `json:"sprout"`
}

// median sets each controller's figures to those of its median round by
// CPU per event: a whole run, so that its latency and RSS stay those of
// one process.
func (s *scaleSize) median() {
	if len(s.EachRound) == 0 {
		return
	}
	pick := func(get func(scaleRound) scaleRun) scaleRun {
		rs := make([]scaleRun, 0, len(s.EachRound))
		for _, r := range s.EachRound {
			rs = append(rs, get(r))
		}
		slices.SortStableFunc(rs, func(x, y scaleRun) int { return cmp.Compare(x.CPUMsPerEvent, y.CPUMsPerEvent) })
		return rs[len(rs)/2]
	}
	s.Baseline = pick(func(r scaleRound) scaleRun { return r.Baseline })
	s.Sprout = pick(func(r scaleRound) scaleRun { return r.Sprout })
}

// scaleRun is one controller in scenario 10.
type scaleRun struct {
	Triggers int `json:"triggers"`
	// Cold is the copying of the triggers that existed when it started.
	Cold controllerRun `json:"cold"`
	// Steady is the triggers created at the steady rate afterwards.
	Steady latencyRun `json:"steady"`
	// CPUMsPerEvent is the process's CPU time during Steady per trigger
	// created.
	CPUMsPerEvent float64 `json:"cpuMsPerEvent"`
}

// scaleAt is scenario 10 at the size nearest n, if it ran.
func (r *result) scaleAt(n int) (scaleSize, bool) {
	if len(r.Scale) == 0 {
		return scaleSize{}, false
	}
	best := r.Scale[0]
	for _, s := range r.Scale[1:] {
		if abs(s.Triggers-n) < abs(best.Triggers-n) {
			best = s
		}
	}
	return best, true
}

func abs(n int) int { return max(n, -n) }
