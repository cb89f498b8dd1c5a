package main

import (
	"bytes"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLatencyOf(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want latency
	}{
		{"none", nil, latency{}},
		{"one", ms(7), latency{Count: 1, P50Ms: 7, P99Ms: 7, MaxMs: 7}},
		{"unsorted", ms(30, 10, 20), latency{Count: 3, P50Ms: 20, P99Ms: 30, MaxMs: 30}},
		{"nearest rank", ms(hundred...), latency{Count: 100, P50Ms: 50, P99Ms: 99, MaxMs: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := latencyOf(tc.in); got != tc.want {
				t.Errorf("latencyOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPackageOf(t *testing.T) {
	for fn, want := range map[string]string{
		"runtime.mallocgc": "runtime",
		"k8s.io/apimachinery/pkg/runtime.(*Scheme).New":                      "k8s.io/apimachinery/pkg/runtime",
		"github.com/sprout-gitops/sprout/inventory.(*Applier).each.func1":    "github.com/sprout-gitops/sprout/inventory",
		"k8s.io/apimachinery/pkg/util/sets.Set[go.shape.string].Insert":      "k8s.io/apimachinery/pkg/util/sets",
		"sigs.k8s.io/json/internal/golang/encoding/json.(*decodeState).skip": "sigs.k8s.io/json/internal/golang/encoding/json",
	} {
		if got := packageOf(fn); got != want {
			t.Errorf("packageOf(%q) = %q, want %q", fn, got, want)
		}
	}
}

// sink keeps an allocation of the heap profile test alive.
var sink []byte

func TestSummariseHeapProfile(t *testing.T) {
	// A heap profile shows what the last garbage collection saw.
	sink = make([]byte, 4<<20)
	runtime.GC()
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 0); err != nil {
		t.Fatal(err)
	}
	s, err := summarise(buf.Bytes(), "alloc_space", "heap.pprof")
	if err != nil {
		t.Fatal(err)
	}
	if s.Unit != "MiB" || s.Total <= 0 || len(s.Flat) == 0 {
		t.Fatalf("summary of the test's own heap: %+v", s)
	}
	if !slices.IsSortedFunc(s.Flat, func(a, b topEntry) int { return int(b.Value*1e6 - a.Value*1e6) }) {
		t.Errorf("flat entries not heaviest first: %+v", s.Flat)
	}
	if _, err := summarise(buf.Bytes(), "cpu", "heap.pprof"); err == nil {
		t.Error("a heap profile has no cpu samples, but summarise found some")
	}
}

func TestColdMedian(t *testing.T) {
	round := func(a, b, c, s float64, rss float64) coldRound {
		return coldRound{RawCreate: rate{PerSecond: a}, RawApply: rate{PerSecond: b},
			Baseline: controllerRun{rate: rate{PerSecond: c}}, Sprout: controllerRun{rate: rate{PerSecond: s}, PeakRSSMiB: rss}}
	}
	c := cold{EachRound: []coldRound{round(1500, 900, 800, 700, 110), round(1400, 1000, 700, 900, 125), round(1600, 950, 900, 800, 100)}}
	c.median()
	got := []float64{c.RawCreate.PerSecond, c.RawApply.PerSecond, c.Baseline.PerSecond, c.Sprout.PerSecond}
	if want := []float64{1500, 950, 800, 800}; !slices.Equal(got, want) {
		t.Errorf("medians = %v, want %v", got, want)
	}
	if c.Sprout.PeakRSSMiB != 100 {
		t.Errorf("the median sprout run's RSS = %v, want that of the same run, 100", c.Sprout.PeakRSSMiB)
	}
	if m := c.peakRSSMiB(); m != 125 {
		t.Errorf("peak RSS over the rounds = %v, want 125", m)
	}
}

// A restart's first copy is each controller's median round, and the
// level table judges its every round.
func TestRestartFirstMedian(t *testing.T) {
	c := cold{EachRound: []coldRound{
		{RestartFirstSeconds: 0.9, BaselineRestartFirstSeconds: 0.5},
		{RestartFirstSeconds: 0.6, BaselineRestartFirstSeconds: 1.0},
		{RestartFirstSeconds: 0.7, BaselineRestartFirstSeconds: 0.6},
	}}
	s, b := c.restartFirst()
	if s != 0.7 || b != 0.6 {
		t.Errorf("medians = %v, %v; want 0.7, 0.6", s, b)
	}
	r := result{Cold: c, Restart: restart{Objects: 10, FirstSeconds: s, BaselineFirstSeconds: b}}
	r.Scenarios = []scenarioTime{{Name: "cold"}}
	for _, f := range r.levelFigures() {
		if strings.HasPrefix(f.name, "3 restart") {
			if w := f.worst(); w != 1.8 {
				t.Errorf("worst round = %.2f, want 1.80 (0.9 s against 0.5)", w)
			}
			return
		}
	}
	t.Error("no restart figure in the level table")
}

func TestScaleMedian(t *testing.T) {
	run := func(cpu, p99, rss float64) scaleRun {
		return scaleRun{CPUMsPerEvent: cpu, Steady: latencyRun{Latency: latency{P99Ms: p99}, PeakRSSMiB: rss}}
	}
	z := scaleSize{Triggers: 10000, EachRound: []scaleRound{
		{Baseline: run(1.2, 9, 80), Sprout: run(3.1, 14, 120)},
		{Baseline: run(1.7, 12, 85), Sprout: run(2.8, 13, 118)},
		{Baseline: run(1.5, 10, 82), Sprout: run(3.4, 15, 125)},
	}}
	z.median()
	if z.Baseline.CPUMsPerEvent != 1.5 || z.Sprout.CPUMsPerEvent != 3.1 {
		t.Errorf("medians = %v, %v; want 1.5, 3.1", z.Baseline.CPUMsPerEvent, z.Sprout.CPUMsPerEvent)
	}
	if z.Baseline.Steady.Latency.P99Ms != 10 || z.Sprout.Steady.PeakRSSMiB != 120 {
		t.Errorf("the median runs' p99 and RSS = %v, %v; want those of the same runs, 10 and 120",
			z.Baseline.Steady.Latency.P99Ms, z.Sprout.Steady.PeakRSSMiB)
	}
}

// A figure against the baseline is judged by its worst round: one met by
// the medians but not by every round is not met by more than the noise.
func TestLevelJudgedByTheWorstRound(t *testing.T) {
	f := levelFigure{baseline: 10, mine: 11, rounds: []float64{1.1, 1.3, 1.0}}
	if got := f.worst(); got != 1.3 {
		t.Errorf("worst of rounds 1.1, 1.3, 1.0 with medians at 1.1: %.2f, want 1.30", got)
	}
	if got := (levelFigure{baseline: 10, mine: 11}).worst(); got != 1.1 {
		t.Errorf("worst of one run at 1.1: %.2f", got)
	}
}

// The level table's values are each figure's own median over the rounds:
// the scenario table's median round by CPU per event holds a p99 of its
// own, which against the baseline's of another round made a ratio that
// no round had.
func TestLevelTakesEachFigureMedian(t *testing.T) {
	run := func(cpu, p99 float64) scaleRun {
		return scaleRun{CPUMsPerEvent: cpu, Steady: latencyRun{Latency: latency{P99Ms: p99}}}
	}
	z := scaleSize{Triggers: 1000, EachRound: []scaleRound{
		{Baseline: run(1.47, 8.5), Sprout: run(2.49, 8.5)},
		{Baseline: run(1.42, 10.6), Sprout: run(2.71, 11.4)},
		{Baseline: run(1.79, 11.9), Sprout: run(2.78, 10.1)},
	}}
	z.median()
	r := result{Scale: []scaleSize{z}}
	for _, f := range r.levelFigures() {
		if !strings.HasSuffix(f.name, "p99") {
			continue
		}
		if f.baseline != 10.6 || f.mine != 10.1 {
			t.Errorf("p99 medians = %v, %v; want 10.6 and 10.1, each controller's middle round of p99", f.baseline, f.mine)
		}
		if w := f.worst(); w > 1.1 {
			t.Errorf("worst = %.2f; every round is within 1.07", w)
		}
		return
	}
	t.Error("no p99 figure in the level table")
}

// A controller's drift writes print as counted, and as "-" in results
// written before they were counted (-1), never as a negative count.
func TestRepairWrites(t *testing.T) {
	counted := repairRun{Modified: repair{Writes: 1000}, Deleted: repair{Writes: 1039}}
	if got := repairWrites(counted); got != "1000, 1039" {
		t.Errorf("counted: %q, want %q", got, "1000, 1039")
	}
	uncounted := repairRun{Modified: repair{Writes: -1}, Deleted: repair{Writes: -1}}
	if got := repairWrites(uncounted); got != "-" {
		t.Errorf("not counted: %q, want %q", got, "-")
	}
}
