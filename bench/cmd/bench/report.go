package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// result is what latest.json holds.
type result struct {
	Machine machineInfo `json:"machine"`
	Params  params      `json:"params"`
	Started time.Time   `json:"started"`
	Seconds float64     `json:"seconds"`
	Cold    cold        `json:"coldGeneration"`
	Restart restart     `json:"noopRestart"`
	Burst   burst       `json:"burst"`
	Targets []target    `json:"targets"`
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
}

func rateOf(n int, d time.Duration) rate {
	r := rate{Objects: n, Seconds: d.Seconds()}
	if d > 0 {
		r.PerSecond = float64(n) / d.Seconds()
	}
	return r
}

// ratios compare a throughput with the yardsticks (a), (b) and (c).
type ratios struct {
	RawCreate float64 `json:"vsRawCreate"`
	RawApply  float64 `json:"vsRawApply"`
	Baseline  float64 `json:"vsBaseline,omitempty"`
}

// controllerRun is one controller process generating ConfigMaps.
type controllerRun struct {
	rate
	Expected int `json:"expected"`
	// FirstSeconds is when the first object was seen: the start-up cost.
	FirstSeconds float64 `json:"firstSeconds"`
	// SteadyPerSecond is the rate from the first object to the last.
	SteadyPerSecond float64 `json:"steadyPerSecond"`
	CPUSeconds      float64 `json:"cpuSeconds"`
	PeakRSSMiB      float64 `json:"peakRSSMiB"`
	Ratios          ratios  `json:"ratios"`
}

type cold struct {
	Namespaces      int           `json:"namespaces"`
	NamespaceCreate rate          `json:"namespaceCreate"`
	RawCreate       rate          `json:"rawCreate"`
	RawApply        rate          `json:"rawApply"`
	Baseline        controllerRun `json:"baseline"`
	Sprout          controllerRun `json:"sprout"`
}

type restart struct {
	Objects    int      `json:"objects"`
	Unchanged  int      `json:"unchanged"`
	Writes     int64    `json:"writes"`
	WritesSeen []string `json:"writesSeen,omitempty"`
	Seconds    float64  `json:"seconds"`
	CPUSeconds float64  `json:"cpuSeconds"`
	PeakRSSMiB float64  `json:"peakRSSMiB"`
}

type burst struct {
	Namespaces    int           `json:"namespaces"`
	CreateSeconds float64       `json:"createSeconds"`
	Baseline      controllerRun `json:"baseline"`
	Sprout        controllerRun `json:"sprout"`
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

// judge fills in the ratios and the targets.
func (r *result) judge() {
	a, b := r.Cold.RawCreate.PerSecond, r.Cold.RawApply.PerSecond
	c := &r.Cold
	c.Baseline.Ratios = ratios{RawCreate: ratio(c.Baseline.PerSecond, a), RawApply: ratio(c.Baseline.PerSecond, b)}
	c.Sprout.Ratios = ratios{RawCreate: ratio(c.Sprout.PerSecond, a), RawApply: ratio(c.Sprout.PerSecond, b), Baseline: ratio(c.Sprout.PerSecond, c.Baseline.PerSecond)}
	u := &r.Burst
	u.Baseline.Ratios = ratios{RawCreate: ratio(u.Baseline.PerSecond, a), RawApply: ratio(u.Baseline.PerSecond, b)}
	u.Sprout.Ratios = ratios{RawCreate: ratio(u.Sprout.PerSecond, a), RawApply: ratio(u.Sprout.PerSecond, b), Baseline: ratio(u.Sprout.PerSecond, u.Baseline.PerSecond)}
	generated := 100 * float64(u.Sprout.Objects) / float64(max(u.Namespaces, 1))
	r.Targets = []target{
		{"1 cold generation vs raw SSA (b)", "≥ 0.95×", fmt.Sprintf("%.2f×", c.Sprout.Ratios.RawApply), c.Sprout.Ratios.RawApply >= 0.95},
		{"1 cold generation vs baseline (c)", "≥ 0.90×", fmt.Sprintf("%.2f×", c.Sprout.Ratios.Baseline), c.Sprout.Ratios.Baseline >= 0.9},
		{"1 sprout peak RSS", "< 120 MiB", fmt.Sprintf("%.0f MiB", c.Sprout.PeakRSSMiB), c.Sprout.PeakRSSMiB > 0 && c.Sprout.PeakRSSMiB < 120},
		{"3 no-op restart writes", "0", fmt.Sprint(r.Restart.Writes), r.Restart.Writes == 0 && r.Restart.Unchanged == r.Restart.Objects},
		{"8 burst generated", "100 %", fmt.Sprintf("%.1f %%", generated), u.Sprout.Objects == u.Namespaces},
	}
}

// print writes the human table.
func (r *result) print(w io.Writer) {
	p := r.Params
	fmt.Fprintf(w, "Sprout benchmarks: %d Namespaces (burst %d), %d goroutines/workers, controllers at %.0f QPS; %d cores (%s), %s, load %s\n\n",
		p.Namespaces, p.BurstSize, p.Parallel, p.ControllerQPS, r.Machine.Cores, r.Machine.CPU, r.Machine.GoVersion, r.Machine.LoadAverage)
	t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "scenario\tfigure\tobjects\tseconds\tobjects/s\tvs (a)\tvs (b)\tvs (c)\tCPU s\tpeak RSS\t1st at s\tsteady/s")
	row := func(s, fig string, x rate, rs *ratios, cpu, rss float64, run ...controllerRun) {
		cols := []string{s, fig, fmt.Sprint(x.Objects), fmt.Sprintf("%.2f", x.Seconds), "", "", "", "", "", "", "", ""}
		if x.PerSecond > 0 {
			cols[4] = fmt.Sprintf("%.0f", x.PerSecond)
		}
		for _, c := range run {
			cols[10], cols[11] = fmt.Sprintf("%.2f", c.FirstSeconds), fmt.Sprintf("%.0f", c.SteadyPerSecond)
		}
		if rs != nil {
			cols[5], cols[6] = fmt.Sprintf("%.2f", rs.RawCreate), fmt.Sprintf("%.2f", rs.RawApply)
			if rs.Baseline != 0 {
				cols[7] = fmt.Sprintf("%.2f", rs.Baseline)
			}
		}
		if cpu > 0 {
			cols[8] = fmt.Sprintf("%.1f", cpu)
		}
		if rss > 0 {
			cols[9] = fmt.Sprintf("%.0f MiB", rss)
		}
		fmt.Fprintln(t, strings.Join(cols, "\t"))
	}
	c := r.Cold
	row("1 cold", "Namespaces created", c.NamespaceCreate, nil, 0, 0)
	row("1 cold", "(a) raw create", c.RawCreate, &ratios{RawCreate: 1, RawApply: ratio(c.RawCreate.PerSecond, c.RawApply.PerSecond)}, 0, 0)
	row("1 cold", "(b) raw SSA", c.RawApply, &ratios{RawCreate: ratio(c.RawApply.PerSecond, c.RawCreate.PerSecond), RawApply: 1}, 0, 0)
	row("1 cold", "(c) baseline", c.Baseline.rate, &c.Baseline.Ratios, c.Baseline.CPUSeconds, c.Baseline.PeakRSSMiB, c.Baseline)
	row("1 cold", "sprout", c.Sprout.rate, &c.Sprout.Ratios, c.Sprout.CPUSeconds, c.Sprout.PeakRSSMiB, c.Sprout)
	s := r.Restart
	row("3 restart", fmt.Sprintf("sprout, %d writes", s.Writes), rate{Objects: s.Objects, Seconds: s.Seconds}, nil, s.CPUSeconds, s.PeakRSSMiB)
	u := r.Burst
	row("8 burst", "(c) baseline", u.Baseline.rate, &u.Baseline.Ratios, u.Baseline.CPUSeconds, u.Baseline.PeakRSSMiB, u.Baseline)
	row("8 burst", "sprout", u.Sprout.rate, &u.Sprout.Ratios, u.Sprout.CPUSeconds, u.Sprout.PeakRSSMiB, u.Sprout)
	_ = t.Flush()
	fmt.Fprintln(w, "\nseconds: (a), (b) until the last write returned; controllers from process start (1) or the first")
	fmt.Fprintln(w, "Namespace create (8) until the last ConfigMap was seen; restart until a sync accounted for every object;")
	fmt.Fprintln(w, "1st at: when the first ConfigMap was seen (start-up); steady/s: the rate from the first ConfigMap to the last.")
	fmt.Fprintln(w)
	t = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "target\twant\tgot\t")
	for _, g := range r.Targets {
		met := "met"
		if !g.Met {
			met = "MISSED"
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", g.Figure, g.Want, g.Got, met)
	}
	_ = t.Flush()
	if len(s.WritesSeen) > 0 {
		fmt.Fprintf(w, "\nrestart writes (first %d): %s\n", len(s.WritesSeen), strings.Join(s.WritesSeen, ", "))
	}
}
