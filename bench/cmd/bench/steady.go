package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// steadyLatency is scenario 2: while the controller runs, Namespaces are
// created at SteadyRate per second for SteadySeconds, and each one's
// latency runs from its Create call's response to the first sight of its
// ConfigMap on a watch. A ConfigMap seen before the response counts as 0.
func (b *bench) steadyLatency(ctx context.Context) error {
	n := int(b.SteadyRate * b.SteadySeconds)
	return b.withReadyControllers(ctx, "steady", func(name string, c *cluster, p *process, dir string) error {
		k, err := c.watchGenerated(ctx, n)
		if err != nil {
			return err
		}
		cpuProfile := make(chan error, 1)
		if name == "sprout" {
			// From the middle of the creation, when the caches hold half.
			go func() {
				time.Sleep(time.Duration(b.SteadySeconds/2*float64(time.Second)) - time.Duration(b.CPUProfileSeconds)*time.Second/2)
				s, err := p.cpuProfile(ctx, b.CPUProfileSeconds, filepath.Join(dir, "steady-cpu.pprof"))
				b.res.Profiles.SteadyCPU = s
				cpuProfile <- err
			}()
		}
		returned, err := c.createNamespacesAt(ctx, "steady", b.SteadyRate, time.Duration(b.SteadySeconds*float64(time.Second)))
		if err != nil {
			return fmt.Errorf("create Namespaces: %w", err)
		}
		count, _, _ := k.wait(b.timeout)
		var latencies []time.Duration
		for i, t := range returned {
			if seen, ok := k.seenAt(namespaceName("steady", i), generatedName); ok {
				latencies = append(latencies, max(0, seen.Sub(t)))
			}
		}
		r := latencyRun{Triggers: n, Seen: count, Latency: latencyOf(latencies), CPUSeconds: p.cpuSeconds(), PeakRSSMiB: p.peakRSSMiB()}
		if name == "sprout" {
			if err := <-cpuProfile; err != nil {
				return err
			}
			r.Phases = p.phases(ctx)
			b.res.Steady.Sprout = r
		} else {
			b.res.Steady.Baseline = r
		}
		// Copies over 40 ms: the API server's NamespaceLifecycle
		// admission holds a create in a Namespace its informer has not
		// seen for 50 ms, and how many it held decides the p99.
		held := 0
		for _, l := range latencies {
			if l > 40*time.Millisecond {
				held++
			}
		}
		logf("steady: %s: %d/%d ConfigMaps, p50 %.1f ms, p99 %.1f ms, max %.1f ms, held %d", name, count, n, r.Latency.P50Ms, r.Latency.P99Ms, r.Latency.MaxMs, held)
		return nil
	})
}
