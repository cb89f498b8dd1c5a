package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// coldGeneration is scenario 1, with 3, 4 and 6 on its clusters: N
// Namespaces exist, then (a) and (b) write into each the ConfigMap sprout
// would generate there, and the baseline and sprout, each on a fresh
// control plane, generate one into each. The four run Rounds times, interleaved, so that a slow spell of the
// machine (they last seconds to minutes here) weighs on one round of one of
// them, not on a ratio; the figures are each one's median round. In the
// first round sprout is profiled (6), then restarted with nothing to do (3),
// and both controllers repair drift (4). Every round ends with scenario 3's
// first copy after a restart, so that it too is a median with its spread.
func (b *bench) coldGeneration(ctx context.Context) error {
	n := b.Namespaces
	cold := &b.res.Cold
	cold.Namespaces = n
	for i := range max(b.Rounds, 1) {
		r, err := b.coldRound(ctx, i)
		if err != nil {
			return err
		}
		cold.EachRound = append(cold.EachRound, r)
	}
	cold.median()
	b.res.Restart.FirstSeconds, b.res.Restart.BaselineFirstSeconds = cold.restartFirst()
	return nil
}

// coldRound is round i of scenario 1; the first carries scenarios 3, 4 and 6.
func (b *bench) coldRound(ctx context.Context, i int) (coldRound, error) {
	n, first := b.Namespaces, i == 0
	var round coldRound
	name := func(s string) string { return fmt.Sprintf("%s-%d", s, i+1) }
	raw := func(w rawWrite, into *rate) error {
		return b.withCluster(name(w.name), func(c *cluster, _ string) error {
			d, _, err := c.createNamespaces(ctx, "cold", n, b.Parallel)
			if err != nil {
				return fmt.Errorf("create Namespaces: %w", err)
			}
			if first && w.name == "raw-create" {
				b.res.Cold.NamespaceCreate = rateOf(n, d)
			}
			if *into, err = c.write(ctx, w, "cold", n, b.Parallel, b.timeout); err != nil {
				return fmt.Errorf("%s: %w", w.name, err)
			}
			logf("cold %d: %s: %d ConfigMaps in %.2fs (%.0f/s)", i+1, w.name, n, into.Seconds, into.PerSecond)
			return nil
		})
	}
	// The first round also writes plain ConfigMaps: what sprout's labels
	// and annotations cost the control plane.
	writes := []rawWrite{{name: "raw-create"}, {name: "raw-apply", apply: true}}
	into := []*rate{&round.RawCreate, &round.RawApply}
	if first {
		round.PlainCreate, round.PlainApply = &rate{}, &rate{}
		writes = append(writes, rawWrite{name: "plain-create", plain: true}, rawWrite{name: "plain-apply", apply: true, plain: true})
		into = append(into, round.PlainCreate, round.PlainApply)
	}
	for j, w := range writes {
		if err := raw(w, into[j]); err != nil {
			return round, err
		}
	}
	err := b.withCluster(name("cold-baseline"), func(c *cluster, dir string) error {
		if _, _, err := c.createNamespaces(ctx, "cold", n, b.Parallel); err != nil {
			return fmt.Errorf("create Namespaces: %w", err)
		}
		k, err := c.watchGenerated(ctx, n)
		if err != nil {
			return err
		}
		cpu := c.cpuSeconds()
		p, err := startBaseline(b.baseline, c.kubeconfig, filepath.Join(dir, "baseline.log"), b.baselineArgs()...)
		if err != nil {
			return err
		}
		defer p.stop()
		count, firstSeen, last := k.wait(b.timeout)
		round.Baseline = newRun(count, n, p.started, firstSeen, last, p)
		round.Baseline.ClusterCPUSeconds = c.cpuSeconds() - cpu
		logf("cold %d: baseline: %d/%d ConfigMaps in %.2fs (%.0f/s)", i+1, count, n, round.Baseline.Seconds, round.Baseline.PerSecond)
		if count < n {
			return fmt.Errorf("the baseline generated %d of %d ConfigMaps within %s", count, n, b.timeout)
		}
		p.stop()
		if first {
			if err := b.baselineDrift(ctx, c, dir); err != nil {
				return err
			}
		}
		round.BaselineRestartFirstSeconds, err = b.firstAfterRestart(ctx, c, func() (*process, error) {
			return startBaseline(b.baseline, c.kubeconfig, filepath.Join(dir, "baseline-late.log"), b.baselineArgs()...)
		})
		return err
	})
	if err != nil {
		return round, err
	}
	err = b.withCluster(name("cold-sprout"), func(c *cluster, dir string) error {
		p, run, err := b.generateCold(ctx, c, dir, n, first)
		if p != nil {
			p.stop()
		}
		round.Sprout = run
		if err != nil {
			return err
		}
		if first {
			if err := b.noopRestart(ctx, c, dir); err != nil {
				return err
			}
		}
		round.RestartFirstSeconds, err = b.firstAfterRestart(ctx, c, func() (*process, error) {
			return startSprout(b.sprout, c.kubeconfig, filepath.Join(dir, "sprout-late.log"), b.sproutArgs()...)
		})
		return err
	})
	return round, err
}

// generateCold is the sprout half of scenarios 1 and 7: n Namespaces and
// the policy exist, then sprout starts and generates a ConfigMap in each.
// It returns the sprout process, still running, once that sync has recorded
// everything. With profiles, a CPU profile is taken while sprout generates
// and a heap profile at the end (scenario 6).
func (b *bench) generateCold(ctx context.Context, c *cluster, dir string, n int, profiles bool) (*process, controllerRun, error) {
	if _, _, err := c.createNamespaces(ctx, "cold", n, b.Parallel); err != nil {
		return nil, controllerRun{}, fmt.Errorf("create Namespaces: %w", err)
	}
	if err := c.createPolicy(ctx); err != nil {
		return nil, controllerRun{}, fmt.Errorf("create policy: %w", err)
	}
	k, err := c.watchGenerated(ctx, n)
	if err != nil {
		return nil, controllerRun{}, err
	}
	log := filepath.Join(dir, "sprout.log")
	cpu := c.cpuSeconds()
	p, err := startSprout(b.sprout, c.kubeconfig, log, b.sproutArgs()...)
	if err != nil {
		return nil, controllerRun{}, err
	}
	cpuProfile := make(chan error, 1)
	if profiles {
		// The profile starts with the first ConfigMap, so that it shows
		// generating, not the informers' start.
		go func() {
			pollUntil(b.timeout, func() bool { return k.count() > 0 })
			s, err := p.cpuProfile(ctx, b.CPUProfileSeconds, filepath.Join(dir, "cpu.pprof"))
			b.res.Profiles.ColdCPU = s
			cpuProfile <- err
		}()
	}
	count, first, last := k.wait(b.timeout)
	run := newRun(count, n, p.started, first, last, p)
	run.ClusterCPUSeconds = c.cpuSeconds() - cpu
	logf("cold: sprout: %d/%d ConfigMaps in %.2fs (%.0f/s), %.2f CPU s", count, n, run.Seconds, run.PerSecond, run.CPUSeconds)
	if count < n {
		return p, run, fmt.Errorf("sprout generated %d of %d ConfigMaps within %s (log: %s)", count, n, b.timeout, log)
	}
	// Let the sync that generated them finish (its record) before the
	// profile and a restart, as a rolling update would.
	pollUntil(b.timeout, func() bool { return p.metricSum(ctx, "sprout_objects_total{") >= float64(n) })
	time.Sleep(2 * time.Second)
	if err := c.sameShape(ctx, namespaceName("cold", n-1)); err != nil {
		return p, run, fmt.Errorf("sprout's ConfigMaps are not what (a) and (b) write: %w", err)
	}
	if !profiles {
		run.PeakRSSMiB = p.peakRSSMiB()
		return p, run, nil
	}
	if err := <-cpuProfile; err != nil {
		return p, run, err
	}
	// The peak before the heap profile: building one is the bench's
	// request, not the controller's work.
	run.PeakRSSMiB = p.peakRSSMiB()
	prof := &b.res.Profiles
	prof.ColdHeap, prof.ColdAllocs, err = p.heapProfile(ctx, filepath.Join(dir, "heap.pprof"))
	return p, run, err
}

// firstAfterRestart is scenario 3's first object after a start on a
// cluster that holds every trigger's copy already (and, for sprout, the
// record of all of them): a Namespace created while the controller was
// stopped gets its ConfigMap. It returns the seconds from the start of the
// process that start starts until that ConfigMap was seen.
func (b *bench) firstAfterRestart(ctx context.Context, c *cluster, start func() (*process, error)) (float64, error) {
	ns := namespaceName("late", 0)
	if _, _, err := c.createNamespaces(ctx, "late", 1, 1); err != nil {
		return 0, fmt.Errorf("create Namespace %s: %w", ns, err)
	}
	k, err := c.watchConfigMaps(ctx, 1, metav1.ListOptions{FieldSelector: "metadata.namespace=" + ns + ",metadata.name=" + generatedName})
	if err != nil {
		return 0, err
	}
	p, err := start()
	if err != nil {
		return 0, err
	}
	defer p.stop()
	count, first, _ := k.wait(b.timeout)
	if count < 1 {
		return 0, fmt.Errorf("no ConfigMap in %s within %s of a restart", ns, b.timeout)
	}
	s := first.Sub(p.started).Seconds()
	logf("restart: first copy, in a Namespace created while stopped, %.2fs after start", s)
	return s, nil
}

// baselineDrift is scenario 4 for the baseline: started again, as sprout
// is for it, through a proxy that counts its writes, so that both repair
// through the same hop (plain HTTP to the proxy, HTTP/2 beyond it) and
// their writes are counted alike.
func (b *bench) baselineDrift(ctx context.Context, c *cluster, dir string) error {
	px, kc, err := countingProxy(c, dir)
	if err != nil {
		return err
	}
	defer px.close()
	logPath := filepath.Join(dir, "baseline-drift.log")
	synced := newLogWatch(logPath, "baseline: caches synced")
	p, err := startBaseline(b.baseline, kc, logPath, b.baselineArgs()...)
	if err != nil {
		return err
	}
	defer p.stop()
	// Its copies are all in place: once its caches are synced, its queue
	// holds only keys that cost no request.
	if !pollUntil(b.timeout, synced.seen) {
		return fmt.Errorf("the baseline's caches did not sync within %s (log: %s)", b.timeout, logPath)
	}
	return b.driftRepair(ctx, c, &px.writes, &b.res.Drift.Baseline)
}

// countingProxy starts a proxy to c's API server that counts the writes
// through it, and writes into dir a kubeconfig that reaches c through it.
func countingProxy(c *cluster, dir string) (*proxy, string, error) {
	px, err := newProxy(c.cp.Config)
	if err != nil {
		return nil, "", err
	}
	kc, err := px.kubeconfig(dir)
	if err != nil {
		px.close()
		return nil, "", err
	}
	return px, kc, nil
}

// resyncEvery is the restarted sprout's --resync-schedule, in seconds.
const resyncEvery = 15

// noopRestart is scenario 3: sprout starts again with every downstream in
// place, through a proxy that counts its writes. Drift repair (4) follows
// on the same process.
func (b *bench) noopRestart(ctx context.Context, c *cluster, dir string) error {
	n := b.Namespaces
	px, kc, err := countingProxy(c, dir)
	if err != nil {
		return err
	}
	defer px.close()
	// A scheduled full resync follows the restart (measured below); drift
	// repair on this process may see one too.
	args := append(b.sproutArgs(), "--resync-schedule", fmt.Sprintf("@every %ds", resyncEvery))
	logPath := filepath.Join(dir, "sprout-restart.log")
	p, err := startSprout(b.sprout, kc, logPath, args...)
	if err != nil {
		return err
	}
	defer p.stop()
	// The restart is over when a sync has accounted for every object.
	done := pollUntil(b.timeout, func() bool { return p.metricSum(ctx, "sprout_objects_total{") >= float64(n) })
	r := &b.res.Restart
	r.Objects, r.Seconds, r.CPUSeconds = n, time.Since(p.started).Seconds(), p.cpuSeconds()
	r.Unchanged = int(p.metricSum(ctx, `sprout_objects_total{action="unchanged"`))
	// Writes that follow the sync (record, status) would come now.
	time.Sleep(3 * time.Second)
	r.Writes, r.WritesSeen, r.PeakRSSMiB = px.writes.Load(), px.writeList(), p.peakRSSMiB()
	r.OwedReports = px.firstReports.Load()
	logf("restart: %d writes (and %d access reviews, %d reports owed by the process before), synced in %.2fs, %.2f CPU s, %d unchanged",
		r.Writes, px.reviews.Load(), r.OwedReports, r.Seconds, r.CPUSeconds, r.Unchanged)
	if !done {
		return fmt.Errorf("sprout did not account for %d objects within %s after a restart", n, b.timeout)
	}
	// The next scheduled resync: the CPU from when it began until its sync
	// ended, and the writes from now until then. Its beginning is its log
	// line, read from the log file: scraping /metrics at 20 Hz through the
	// seconds before it would count the bench's own scrapes as Sprout's.
	syncs := func() float64 { return p.metricSum(ctx, "sprout_reconcile_duration_seconds_count{") }
	before, writes, reviews, owed := syncs(), px.writes.Load(), px.reviews.Load(), px.firstReports.Load()
	cpu, began := p.cpuSeconds(), newLogWatch(logPath, "resync: recomputing every policy")
	if !pollUntil(3*resyncEvery*time.Second, func() bool {
		// Read before the log: a line not there yet began after it.
		now := p.cpuSeconds()
		if began.seen() {
			return true
		}
		cpu = now
		return false
	}) {
		return fmt.Errorf("no scheduled resync began within %ds (log: %s)", 3*resyncEvery, logPath)
	}
	if !pollUntil(3*resyncEvery*time.Second, func() bool { return syncs() > before }) {
		return fmt.Errorf("no scheduled resync ended within %ds", 3*resyncEvery)
	}
	r.ResyncCPUSeconds, r.ResyncWrites, r.ResyncOwedReports = p.cpuSeconds()-cpu, px.writes.Load()-writes, px.firstReports.Load()-owed
	logf("resync: %.2f CPU s, %d writes (and %d access reviews, %d reports owed)", r.ResyncCPUSeconds, r.ResyncWrites, px.reviews.Load()-reviews, r.ResyncOwedReports)
	return b.driftRepair(ctx, c, &px.writes, &b.res.Drift.Sprout)
}

// growth is scenario 7: cold generation at GrowthBase Namespaces, whose
// CPU per object the targets compare with scenario 1's at N.
func (b *bench) growth(ctx context.Context) error {
	return b.withCluster("growth", func(c *cluster, dir string) error {
		p, run, err := b.generateCold(ctx, c, dir, b.GrowthBase, false)
		if p != nil {
			p.stop()
		}
		b.res.Growth = run
		return err
	})
}

// newRun measures a controller that generated count of expected objects,
// the first and last seen at those times, from begin.
func newRun(count, expected int, begin, first, last time.Time, p *process) controllerRun {
	if count == 0 {
		first, last = time.Now(), time.Now()
	}
	r := controllerRun{rate: rateOf(count, last.Sub(begin)), Expected: expected, FirstSeconds: first.Sub(begin).Seconds(),
		CPUSeconds: p.cpuSeconds(), PeakRSSMiB: p.peakRSSMiB()}
	if count > 1 {
		r.SteadyPerSecond = float64(count-1) / last.Sub(first).Seconds()
	}
	return r
}
