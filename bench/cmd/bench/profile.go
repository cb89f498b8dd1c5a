package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// topN is how many functions and packages a profile summary keeps.
const topN = 12

// profileSummary is what `go tool pprof -top` shows of a profile, for
// docs/performance.md's reading of where the cost goes (scenario 6): the
// functions with the most of one sample type themselves (flat) and with
// their callees (cum), the packages with the most flat, and Sprout's own
// functions with the most cum (which of its steps the cost comes from).
type profileSummary struct {
	// Sample is the sample type summed: cpu (seconds), inuse_space or
	// alloc_space (MiB).
	Sample string  `json:"sample"`
	Unit   string  `json:"unit"`
	Total  float64 `json:"total"`
	// File is where the profile was saved, for `go tool pprof` (kept with -keep).
	File      string     `json:"file"`
	Flat      []topEntry `json:"topFlat"`
	Cum       []topEntry `json:"topCum"`
	ByPackage []topEntry `json:"topPackagesFlat"`
	Sprout    []topEntry `json:"topSproutCum"`
}

// topEntry is one function or package of a profile summary.
type topEntry struct {
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	Percent float64 `json:"percent"`
}

// sproutModule prefixes the functions of Sprout's own packages.
const sproutModule = "github.com/sprout-gitops/sprout/"

// fetchProfile saves sprout's /debug/pprof/<name> (with query) to file; a
// profile of seconds answers after them.
func (p *process) fetchProfile(ctx context.Context, name, query string, seconds int, file string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute+time.Duration(seconds)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.pprof+"/debug/pprof/"+name+"?"+query, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s profile: %w", name, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s profile: %w", name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s profile: %s: %s", name, resp.Status, raw)
	}
	return raw, os.WriteFile(file, raw, 0o644)
}

// heapProfile takes sprout's heap profile after a garbage collection and
// summarises what is in use and what was allocated since the start.
func (p *process) heapProfile(ctx context.Context, file string) (inUse, allocs *profileSummary, err error) {
	raw, err := p.fetchProfile(ctx, "heap", "gc=1", 0, file)
	if err != nil {
		return nil, nil, err
	}
	if inUse, err = summarise(raw, "inuse_space", file); err != nil {
		return nil, nil, err
	}
	allocs, err = summarise(raw, "alloc_space", file)
	return inUse, allocs, err
}

// cpuProfile profiles sprout's CPU for seconds and summarises it.
func (p *process) cpuProfile(ctx context.Context, seconds int, file string) (*profileSummary, error) {
	raw, err := p.fetchProfile(ctx, "profile", fmt.Sprintf("seconds=%d", seconds), seconds, file)
	if err != nil {
		return nil, err
	}
	return summarise(raw, "cpu", file)
}

// allocsProfile summarises what sprout allocated over the next seconds
// (the delta of two heap profiles, which pprof takes itself).
func (p *process) allocsProfile(ctx context.Context, seconds int, file string) (*profileSummary, error) {
	raw, err := p.fetchProfile(ctx, "allocs", fmt.Sprintf("seconds=%d", seconds), seconds, file)
	if err != nil {
		return nil, err
	}
	return summarise(raw, "alloc_space", file)
}

// summarise adds up the samples of type sample by function and by package,
// as `go tool pprof -top -sample_index=<sample>` does.
func summarise(raw []byte, sample, file string) (*profileSummary, error) {
	prof, err := profile.Parse(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	index := slices.IndexFunc(prof.SampleType, func(t *profile.ValueType) bool { return t.Type == sample })
	if index < 0 {
		return nil, fmt.Errorf("%s: no %s samples", file, sample)
	}
	unit, scale := "seconds", 1e-9
	if prof.SampleType[index].Unit == "bytes" {
		unit, scale = "MiB", 1.0/(1<<20)
	}
	flat, cum, pkgs := map[string]float64{}, map[string]float64{}, map[string]float64{}
	var total float64
	for _, smp := range prof.Sample {
		v := float64(smp.Value[index]) * scale
		total += v
		seen := map[string]bool{}
		for i, loc := range smp.Location {
			// Inlined calls share a location: its first line is the innermost.
			for j, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				fn := line.Function.Name
				if i == 0 && j == 0 {
					flat[fn] += v
					pkgs[packageOf(fn)] += v
				}
				if !seen[fn] {
					seen[fn] = true
					cum[fn] += v
				}
			}
		}
	}
	own := map[string]float64{}
	for fn, v := range cum {
		if strings.HasPrefix(fn, sproutModule) {
			own[strings.TrimPrefix(fn, sproutModule)] = v
		}
	}
	return &profileSummary{Sample: sample, Unit: unit, Total: total, File: file,
		Flat: top(flat, total), Cum: top(cum, total), ByPackage: top(pkgs, total), Sprout: top(own, total)}, nil
}

// top returns the topN largest values of m, with their share of total.
func top(m map[string]float64, total float64) []topEntry {
	var entries []topEntry
	for name, v := range m {
		entries = append(entries, topEntry{Name: name, Value: v, Percent: 100 * ratio(v, total)})
	}
	slices.SortFunc(entries, func(a, b topEntry) int {
		return cmp.Or(cmp.Compare(b.Value, a.Value), strings.Compare(a.Name, b.Name))
	})
	return entries[:min(topN, len(entries))]
}

// packageOf is the import path of a function's symbol name:
// k8s.io/apimachinery/pkg/runtime.(*Scheme).New → k8s.io/apimachinery/pkg/runtime.
func packageOf(fn string) string {
	slash := strings.LastIndexByte(fn, '/') + 1
	if dot := strings.IndexByte(fn[slash:], '.'); dot >= 0 {
		return fn[:slash+dot]
	}
	return fn
}
