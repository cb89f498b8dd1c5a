package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The scale scenario's policy and its yardstick's job: a copy, labelled
// copyLabel, named <name>-out beside every ConfigMap labelled role=trigger.
const (
	scalePolicy    = "configmap-copy"
	scaleSelector  = "role=trigger"
	copyLabel      = "role=copy"
	copySuffix     = "-out"
	scaleNamespace = "scale"
)

// scaleRoundsUpTo is the largest size scenario 10 runs ScaleRounds times:
// a run of 100,000 triggers takes minutes.
const scaleRoundsUpTo = 10000

// scale is scenario 10 at each size: sprout and the baseline, each on a
// fresh cluster where the triggers exist before it starts; ScaleRounds
// times, interleaved, at the sizes up to scaleRoundsUpTo, so that a slow
// spell of the machine falls on one round of one controller, and the
// figures are each one's median round.
func (b *bench) scale(ctx context.Context) error {
	for _, n := range b.ScaleSizes {
		size := scaleSize{Triggers: n}
		rounds := 1
		if n <= scaleRoundsUpTo {
			rounds = max(b.ScaleRounds, 1)
		}
		for i := range rounds {
			var round scaleRound
			for _, name := range []string{"baseline", "sprout"} {
				dir := fmt.Sprintf("scale-%d-%s", n, name)
				if i > 0 {
					dir += fmt.Sprintf("-%d", i+1)
				}
				err := b.withCluster(dir, func(c *cluster, dir string) error {
					r, err := b.scaleRun(ctx, c, dir, name, n)
					if name == "sprout" {
						round.Sprout = r
					} else {
						round.Baseline = r
						b.baselineFirst = r.Cold.FirstSeconds
					}
					return err
				})
				if err != nil {
					return err
				}
			}
			size.EachRound = append(size.EachRound, round)
		}
		size.median()
		b.res.Scale = append(b.res.Scale, size)
	}
	return nil
}

// scaleRun is one controller at one size: n trigger ConfigMaps in
// ScaleNamespaces Namespaces exist, the controller starts and copies each
// (the first copy's time is its start-up), then ConfigMaps are created at
// SteadyRate for ScaleSeconds, whose copies' latency and CPU are measured.
// Sprout runs at its default client rate limit; the baseline at the
// bench's.
func (b *bench) scaleRun(ctx context.Context, c *cluster, dir, name string, n int) (scaleRun, error) {
	r := scaleRun{Triggers: n}
	if err := c.createTriggers(ctx, "t", n, b.ScaleNamespaces, b.Parallel); err != nil {
		return r, fmt.Errorf("create trigger ConfigMaps: %w", err)
	}
	steadyN := int(b.SteadyRate * b.ScaleSeconds)
	k, err := c.watchConfigMaps(ctx, n+steadyN, metav1.ListOptions{LabelSelector: copyLabel})
	if err != nil {
		return r, err
	}
	log := filepath.Join(dir, name+".log")
	var p *process
	if name == "sprout" {
		if err := c.createScalePolicy(ctx); err != nil {
			return r, err
		}
		p, err = startSprout(b.sprout, c.kubeconfig, log, append([]string{"--workers", fmt.Sprint(b.Workers)}, b.SproutArgs...)...)
	} else {
		p, err = startBaseline(b.baseline, c.kubeconfig, log, append(b.baselineArgs(), "--triggers", "configmaps", "--selector", scaleSelector)...)
	}
	if err != nil {
		return r, err
	}
	defer p.stop()
	startProfile := b.startProfile(ctx, name, n, p, dir)
	if !pollUntil(b.timeout, func() bool { return k.count() >= n }) {
		return r, fmt.Errorf("%s copied %d of %d ConfigMaps within %s (log: %s)", name, k.count(), n, b.timeout, log)
	}
	_, first, last := k.snapshot()
	r.Cold = newRun(n, n, p.started, first, last, p)
	if name == "sprout" {
		// The sync that copied them records them; steady starts after it.
		pollUntil(b.timeout, func() bool { return p.metricSum(ctx, "sprout_objects_total{") >= float64(n) })
	}
	if err := startProfile(); err != nil {
		return r, err
	}
	time.Sleep(2 * time.Second) // both controllers settle alike
	logf("scale %d: %s: copies in %.2fs, first at %.2fs, %.2f CPU s, peak RSS %.0f MiB", n, name, r.Cold.Seconds, r.Cold.FirstSeconds, r.Cold.CPUSeconds, r.Cold.PeakRSSMiB)

	profile := b.scaleProfile(ctx, name, n, p, dir)
	cpu := p.cpuSeconds()
	full, incremental := p.syncModes(ctx)
	returned, err := c.createTriggersAt(ctx, "s", b.SteadyRate, time.Duration(b.ScaleSeconds*float64(time.Second)), b.ScaleNamespaces)
	if err != nil {
		return r, fmt.Errorf("create trigger ConfigMaps: %w", err)
	}
	seen, _, _ := k.wait(b.timeout)
	var latencies []time.Duration
	for i, t := range returned {
		if at, ok := k.seenAt(scaleNamespaceOf(i, b.ScaleNamespaces), triggerName("s", i)+copySuffix); ok {
			latencies = append(latencies, max(0, at.Sub(t)))
		}
	}
	r.Steady = latencyRun{Triggers: steadyN, Seen: seen - n, Latency: latencyOf(latencies), CPUSeconds: p.cpuSeconds() - cpu, PeakRSSMiB: p.peakRSSMiB()}
	r.CPUMsPerEvent = 1000 * ratio(r.Steady.CPUSeconds, float64(steadyN))
	if err := profile(); err != nil {
		return r, err
	}
	logf("scale %d: %s: %d/%d copies at %.0f/s, p50 %.1f ms, p99 %.1f ms, %.2f CPU ms per event, peak RSS %.0f MiB",
		n, name, r.Steady.Seen, steadyN, b.SteadyRate, r.Steady.Latency.P50Ms, r.Steady.Latency.P99Ms, r.CPUMsPerEvent, r.Steady.PeakRSSMiB)
	if name == "sprout" {
		f, i := p.syncModes(ctx)
		r.Steady.FullSyncs, r.Steady.IncrementalSyncs = int(f-full), int(i-incremental)
		logf("scale %d: sprout: %d full and %d incremental syncs while steady", n, r.Steady.FullSyncs, r.Steady.IncrementalSyncs)
	}
	if r.Steady.Seen < steadyN {
		return r, fmt.Errorf("%s copied %d of the %d ConfigMaps created at a steady rate (log: %s)", name, r.Steady.Seen, steadyN, log)
	}
	return r, nil
}

// startProfile profiles sprout's CPU from its start, at the largest size
// in its first round, until the baseline's first copy came at the latest
// (one second at least): what a first copy waits for. It returns what
// waits for the profile.
func (b *bench) startProfile(ctx context.Context, name string, n int, p *process, dir string) func() error {
	if name != "sprout" || n != b.ScaleSizes[len(b.ScaleSizes)-1] || b.res.Profiles.StartCPU != nil {
		return func() error { return nil }
	}
	seconds := max(1, int(math.Ceil(b.baselineFirst)))
	var wg sync.WaitGroup
	var err error
	wg.Go(func() {
		var s *profileSummary
		// The profile server is up within milliseconds of the start.
		for range 100 {
			if s, err = p.cpuProfile(ctx, seconds, filepath.Join(dir, "start-cpu.pprof")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.res.Profiles.StartCPU = s
	})
	return func() error { wg.Wait(); return err }
}

// scaleProfile starts sprout's CPU profile in the middle of the steady
// creation at the largest size, and returns the wait for it.
func (b *bench) scaleProfile(ctx context.Context, name string, n int, p *process, dir string) func() error {
	if name != "sprout" || n != b.ScaleSizes[len(b.ScaleSizes)-1] || b.res.Profiles.ScaleCPU != nil {
		return func() error { return nil }
	}
	done := make(chan error, 2)
	go func() {
		time.Sleep(time.Duration(b.ScaleSeconds/2*float64(time.Second)) - time.Duration(b.CPUProfileSeconds)*time.Second/2)
		allocs := make(chan error, 1)
		go func() {
			s, err := p.allocsProfile(ctx, b.CPUProfileSeconds, filepath.Join(dir, "scale-allocs.pprof"))
			b.res.Profiles.ScaleAllocs = s
			allocs <- err
		}()
		s, err := p.cpuProfile(ctx, b.CPUProfileSeconds, filepath.Join(dir, "scale-cpu.pprof"))
		b.res.Profiles.ScaleCPU = s
		done <- errors.Join(err, <-allocs)
	}()
	return func() error { return <-done }
}

func triggerName(prefix string, i int) string { return fmt.Sprintf("%s-%06d", prefix, i) }

// scaleNamespaceOf is the Namespace trigger i is created in.
func scaleNamespaceOf(i, namespaces int) string { return namespaceName(scaleNamespace, i%namespaces) }

// createTrigger creates trigger ConfigMap i of prefix.
func (c *cluster) createTrigger(ctx context.Context, prefix string, i, namespaces int) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: triggerName(prefix, i), Namespace: scaleNamespaceOf(i, namespaces), Labels: map[string]string{"role": "trigger"}},
		Data:       map[string]string{"key": "value"},
	}
	_, err := c.kube.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	return err
}

// createTriggers creates the Namespaces and n trigger ConfigMaps spread
// over them, from workers goroutines.
func (c *cluster) createTriggers(ctx context.Context, prefix string, n, namespaces, workers int) error {
	for i := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceName(scaleNamespace, i)}}
		if _, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	_, err := parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		return c.createTrigger(ctx, prefix, i, namespaces)
	})
	return err
}

// createTriggersAt creates trigger ConfigMaps at perSecond for d and
// returns when each Create call returned, by index.
func (c *cluster) createTriggersAt(ctx context.Context, prefix string, perSecond float64, d time.Duration, namespaces int) ([]time.Time, error) {
	return createAt(ctx, perSecond, d, func(ctx context.Context, i int) error {
		return c.createTrigger(ctx, prefix, i, namespaces)
	})
}

// createScalePolicy creates fixtures/configmap-copy with generateExisting on.
func (c *cluster) createScalePolicy(ctx context.Context) error {
	raw, err := os.ReadFile(filepath.Join("fixtures", scalePolicy, "policy.yaml"))
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		return fmt.Errorf("fixtures/%s/policy.yaml: %w", scalePolicy, err)
	}
	if err := unstructured.SetNestedField(obj.Object, true, "spec", "evaluation", "generateExisting", "enabled"); err != nil {
		return err
	}
	_, err = c.dynamic.Resource(policies).Create(ctx, obj, metav1.CreateOptions{})
	return err
}

// parseSizes reads -scale-sizes: ascending trigger counts.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n <= 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("-scale-sizes: %q is not a list of ascending positive counts", s)
		}
		out = append(out, n)
	}
	return out, nil
}
