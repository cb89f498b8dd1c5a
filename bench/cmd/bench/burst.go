package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// burst is scenario 8, with 9 measured during it: the controller runs (for
// sprout, with the policy in place) and M Namespaces are created as fast as
// the client can. Each Create call is timed, and the control plane's CPU
// is read before the first and after the last ConfigMap.
func (b *bench) burst(ctx context.Context) error {
	m := b.BurstSize
	b.res.Burst.Namespaces = m
	return b.withReadyControllers(ctx, "burst", func(name string, c *cluster, p *process, _ string) error {
		k, err := c.watchGenerated(ctx, m)
		if err != nil {
			return err
		}
		apiCPU, etcdCPU := cpuSeconds(c.apiServer), cpuSeconds(c.etcd)
		begin := time.Now()
		d, calls, err := c.createNamespaces(ctx, "burst", m, b.Parallel)
		if err != nil {
			return fmt.Errorf("create Namespaces: %w", err)
		}
		count, first, last := k.wait(b.timeout)
		r := burstRun{controllerRun: newRun(count, m, begin, first, last, p), CreateSeconds: d.Seconds(), Create: latencyOf(calls)}
		// The writes that follow the last ConfigMap (sprout's record) are
		// part of the cost; both controllers get the same wait.
		time.Sleep(2 * time.Second)
		r.APIServerCPUSeconds = cpuSeconds(c.apiServer) - apiCPU
		r.EtcdCPUSeconds = cpuSeconds(c.etcd) - etcdCPU
		if name == "sprout" {
			b.res.Burst.Sprout = r
		} else {
			b.res.Burst.Baseline = r
		}
		logf("burst: %s: %d/%d ConfigMaps, the last %.2fs after the first create (Namespaces created in %.2fs, Create p99 %.1f ms); kube-apiserver %.2f CPU s",
			name, count, m, r.Seconds, d.Seconds(), r.Create.P99Ms, r.APIServerCPUSeconds)
		return nil
	})
}

// withReadyControllers runs fn for the baseline, then for sprout, each on a
// fresh cluster of its own and ready to react to new triggers.
func (b *bench) withReadyControllers(ctx context.Context, part string, fn func(name string, c *cluster, p *process, dir string) error) error {
	for _, name := range []string{"baseline", "sprout"} {
		err := b.withCluster(part+"-"+name, func(c *cluster, dir string) error {
			p, err := b.startReady(ctx, name, c, dir)
			if err != nil {
				return err
			}
			defer p.stop()
			return fn(name, c, p, dir)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// startReady starts a controller of scenarios 2 and 8 on a fresh cluster
// and returns once it reacts to new triggers: the baseline when its caches
// synced, sprout (with the benchmark policy created first) when ready.
func (b *bench) startReady(ctx context.Context, name string, c *cluster, dir string) (*process, error) {
	log := filepath.Join(dir, name+".log")
	if name == "baseline" {
		p, err := startBaseline(b.baseline, c.kubeconfig, log, b.baselineArgs()...)
		if err != nil {
			return nil, err
		}
		if !pollUntil(time.Minute, func() bool { raw, _ := os.ReadFile(log); return strings.Contains(string(raw), "caches synced") }) {
			p.stop()
			return nil, fmt.Errorf("baseline did not sync its caches (log: %s)", log)
		}
		return p, nil
	}
	if err := c.createPolicy(ctx); err != nil {
		return nil, fmt.Errorf("create policy: %w", err)
	}
	p, err := startSprout(b.sprout, c.kubeconfig, log, b.sproutArgs()...)
	if err != nil {
		return nil, err
	}
	if !pollUntil(time.Minute, func() bool { return p.ready(ctx) }) {
		p.stop()
		return nil, fmt.Errorf("sprout not ready within a minute (log: %s)", log)
	}
	return p, nil
}
