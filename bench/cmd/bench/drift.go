package main

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// driftPatch is what scenario 4 does to a generated ConfigMap behind the
// controller's back.
const driftPatch = `{"data":{"KAFKA_ADDRESS":"drifted"}}`

// driftRepair is scenario 4, on a cluster where the controller keeps the
// ConfigMap of scenario 1 in every Namespace: DriftSize of them are
// modified at once, then deleted at once, and each phase lasts until the
// controller has put every one back. writes, when not nil, counts the
// controller's writes at a proxy.
func (b *bench) driftRepair(ctx context.Context, c *cluster, writes *atomic.Int64, into *repairRun) error {
	n := min(b.DriftSize, b.Namespaces)
	b.res.Drift.Objects = n
	namespaces := make([]string, n)
	for i := range namespaces {
		namespaces[i] = namespaceName("cold", i)
	}
	phases := []struct {
		name  string
		into  *repair
		spoil func(ctx context.Context, ns string) error
	}{
		{"modified", &into.Modified, func(ctx context.Context, ns string) error {
			_, err := c.kube.CoreV1().ConfigMaps(ns).Patch(ctx, generatedName, types.MergePatchType, []byte(driftPatch), metav1.PatchOptions{})
			return err
		}},
		{"deleted", &into.Deleted, func(ctx context.Context, ns string) error {
			return c.kube.CoreV1().ConfigMaps(ns).Delete(ctx, generatedName, metav1.DeleteOptions{})
		}},
	}
	for _, ph := range phases {
		w, err := c.watchRepairs(ctx, namespaces)
		if err != nil {
			return err
		}
		var before int64
		if writes != nil {
			before = writes.Load()
		}
		start, cpu := time.Now(), c.cpuSeconds()
		if _, err := parallel(ctx, n, b.Parallel, func(ctx context.Context, i int) error { return ph.spoil(ctx, namespaces[i]) }); err != nil {
			w.stop()
			return fmt.Errorf("drift: %s: %w", ph.name, err)
		}
		fixed, last := w.wait(b.timeout)
		if fixed == 0 {
			last = time.Now()
		}
		*ph.into = repair{rate: rateOf(fixed, last.Sub(start)), Expected: n, Writes: -1}
		// The control plane's CPU over the phase, the breaking included:
		// the same for both controllers, so what differs is their repairs'.
		ph.into.ClusterCPUSeconds = c.cpuSeconds() - cpu
		if writes != nil {
			// The record written after the repairs belongs to them.
			time.Sleep(2 * time.Second)
			ph.into.Writes = writes.Load() - before
		}
		logf("drift: %d/%d %s ConfigMaps put back in %.2fs", fixed, n, ph.name, ph.into.Seconds)
	}
	return nil
}

// repairs watches the benchmark policy's ConfigMaps in some Namespaces and
// tells when each, once seen modified or deleted, was seen right again.
type repairs struct {
	mu      sync.Mutex
	watched map[string]bool
	broken  map[string]bool
	fixed   map[string]bool
	last    time.Time
	done    chan struct{}
	stop    context.CancelFunc
}

// watchRepairs starts watching the ConfigMaps of namespaces.
func (c *cluster) watchRepairs(ctx context.Context, namespaces []string) (*repairs, error) {
	ctx, stop := context.WithCancel(ctx)
	r := &repairs{watched: map[string]bool{}, broken: map[string]bool{}, fixed: map[string]bool{}, done: make(chan struct{}), stop: stop}
	for _, ns := range namespaces {
		r.watched[ns] = true
	}
	f := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + generatedName
	}))
	inf := f.Core().V1().ConfigMaps().Informer()
	observe := func(obj any, deleted bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			r.observe(cm.Namespace, !deleted && maps.Equal(cm.Data, configMapData))
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observe(obj, false) },
		UpdateFunc: func(_, obj any) { observe(obj, false) },
		DeleteFunc: func(obj any) { observe(obj, true) },
	})
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		stop()
		return nil, fmt.Errorf("ConfigMap watch did not sync")
	}
	return r, nil
}

// observe notes the state of the ConfigMap in ns: broken, or right, which
// is a repair if it was seen broken before.
func (r *repairs) observe(ns string, right bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.watched[ns] || r.fixed[ns] {
		return
	}
	if !right {
		r.broken[ns] = true
		return
	}
	if r.broken[ns] {
		r.fixed[ns], r.last = true, time.Now()
		if len(r.fixed) == len(r.watched) {
			close(r.done)
		}
	}
}

// wait waits until every watched ConfigMap was repaired or timeout passed,
// and returns how many were and when the last was.
func (r *repairs) wait(timeout time.Duration) (int, time.Time) {
	select {
	case <-r.done:
	case <-time.After(timeout):
	}
	r.stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.fixed), r.last
}
