package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// levelTarget is issue #44's: every figure of sprout's within this ratio
// of the baseline's (the minimal controller), lower being better.
const levelTarget = 1.2

// levelFigure is one figure of the comparison with the baseline: each
// controller's median of the figure over the rounds, and the ratio of each
// round, where the two ran one after the other on the same machine.
type levelFigure struct {
	name, unit     string
	baseline, mine float64
	rounds         []float64
	// ofBaseline and ofMine are the rounds' values, in the order of rounds.
	ofBaseline, ofMine []float64
}

// add is one round's values of the figure.
func (f *levelFigure) add(baseline, mine float64) {
	f.ofBaseline, f.ofMine = append(f.ofBaseline, baseline), append(f.ofMine, mine)
	f.rounds = append(f.rounds, ratio(mine, baseline))
}

// medians is f with each controller's value the median of its rounds'
// values of this figure. The scenario tables above show each controller's
// median round by one figure (objects/s, CPU per event), which holds that
// round's other figures too; the median of another figure is often of
// another round, and a round's p99 beside another's made a ratio that no
// round had.
func (f levelFigure) medians() levelFigure {
	if len(f.ofMine) > 0 {
		f.baseline, f.mine = median(f.ofBaseline), median(f.ofMine)
	}
	return f
}

// median is the middle value of xs, the upper one of an even count.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// worst is the highest ratio of the rounds, or the medians' when there is
// one round: a target is met only if every round meets it, so that it is
// met by more than the spread of the rounds.
func (f levelFigure) worst() float64 {
	w := ratio(f.mine, f.baseline)
	for _, r := range f.rounds {
		w = max(w, r)
	}
	return w
}

// levelFigures are the figures issue #44 compares: start-up, steady p99,
// CPU per event and peak RSS at each size of scenario 10, the cold CPU per
// object and peak RSS of scenario 1, the first copy after a restart on
// scenario 1's cluster (3), and scenario 2's steady figures.
func (r *result) levelFigures() []levelFigure {
	var out []levelFigure
	if r.ran("cold") {
		c := r.Cold
		cpu := levelFigure{name: "1 cold: CPU per created object", unit: "ms", baseline: c.Baseline.cpuMsPerObject(), mine: c.Sprout.cpuMsPerObject()}
		rss := levelFigure{name: "1 cold: peak RSS", unit: "MiB", baseline: c.Baseline.PeakRSSMiB, mine: c.Sprout.PeakRSSMiB}
		if len(c.EachRound) > 1 {
			for _, rd := range c.EachRound {
				cpu.add(rd.Baseline.cpuMsPerObject(), rd.Sprout.cpuMsPerObject())
				rss.add(rd.Baseline.PeakRSSMiB, rd.Sprout.PeakRSSMiB)
			}
		}
		out = append(out, cpu.medians(), rss.medians())
		if rs := r.Restart; rs.FirstSeconds > 0 && rs.BaselineFirstSeconds > 0 {
			f := levelFigure{name: fmt.Sprintf("3 restart, %d recorded: first copy after start", rs.Objects), unit: "s",
				baseline: rs.BaselineFirstSeconds, mine: rs.FirstSeconds}
			if len(c.EachRound) > 1 {
				for _, rd := range c.EachRound {
					f.rounds = append(f.rounds, ratio(rd.RestartFirstSeconds, rd.BaselineRestartFirstSeconds))
				}
			}
			out = append(out, f)
		}
	}
	if r.ran("steady") {
		b, s := r.Steady.Baseline, r.Steady.Sprout
		out = append(out,
			levelFigure{name: "2 steady Namespaces: created → seen p99", unit: "ms", baseline: b.Latency.P99Ms, mine: s.Latency.P99Ms},
			levelFigure{name: "2 steady Namespaces: CPU", unit: "s", baseline: b.CPUSeconds, mine: s.CPUSeconds})
	}
	for _, z := range r.Scale {
		sc := fmt.Sprintf("10 scale %d: ", z.Triggers)
		figs := []struct {
			name, unit string
			get        func(scaleRun) float64
		}{
			{"first copy after start", "s", func(s scaleRun) float64 { return s.Cold.FirstSeconds }},
			{"created → copy seen p99", "ms", func(s scaleRun) float64 { return s.Steady.Latency.P99Ms }},
			{"CPU per event", "ms", func(s scaleRun) float64 { return s.CPUMsPerEvent }},
			{"peak RSS", "MiB", func(s scaleRun) float64 { return max(s.Cold.PeakRSSMiB, s.Steady.PeakRSSMiB) }},
		}
		for _, g := range figs {
			f := levelFigure{name: sc + g.name, unit: g.unit, baseline: g.get(z.Baseline), mine: g.get(z.Sprout)}
			if len(z.EachRound) > 1 {
				for _, rd := range z.EachRound {
					f.add(g.get(rd.Baseline), g.get(rd.Sprout))
				}
			}
			out = append(out, f.medians())
		}
	}
	return out
}

// printLevel is issue #44's table: each figure against the baseline's,
// with the ratio of every round, judged by the worst.
func (r *result) printLevel(w io.Writer) {
	figs := r.levelFigures()
	if len(figs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nagainst the baseline (issue #44: each figure within %.1fx in every round)\n", levelTarget)
	t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "figure\t(c) baseline\tsprout\tsprout/(c)\teach round\t")
	for _, f := range figs {
		var rounds []string
		for _, x := range f.rounds {
			rounds = append(rounds, fmt.Sprintf("%.2f", x))
		}
		verdict := "met"
		if f.worst() > levelTarget {
			verdict = "MISSED"
		}
		fmt.Fprintf(t, "%s\t%.2f %s\t%.2f %s\t%.2f\t%s\t%s\n", f.name, f.baseline, f.unit, f.mine, f.unit, ratio(f.mine, f.baseline), strings.Join(rounds, ", "), verdict)
	}
	_ = t.Flush()
}
