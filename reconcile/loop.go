package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
)

// The loop: the work queues, the workers that take policies from them,
// and the start and stop of the informers and sources that feed them.

// Run starts the informers and workers and blocks until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	if c.opts.DryRun {
		return errors.New("a dry-run controller only plans: call Plan")
	}
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	c.tell.Open()
	defer c.tell.Close()

	if err := c.start(ctx); err != nil {
		return err
	}
	for _, src := range c.opts.Sources {
		if src.Complete() {
			c.retireOrphanRecords(src.Name())
		}
	}
	return c.run(ctx)
}

// start starts the informers and the sources and waits until each has
// delivered what it held.
func (c *Controller) start(ctx context.Context) error {
	c.mu.Lock()
	c.ctx, c.intake.ctx = ctx, ctx
	c.mu.Unlock()
	c.intake.triggers.Start(ctx)
	c.intake.generated.Start(ctx)
	// Discovery, which the first policy's mapping and writes wait for.
	go func() { _, _ = c.kinds.Resources() }()

	// A Namespace's labels decide namespaceSelector matches and are read as
	// namespaceObject: when they change, every policy is recomputed.
	if _, err := c.intake.informers.Core().V1().Namespaces().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Namespace)
			n, ok2 := obj.(*corev1.Namespace)
			switch {
			case ok1 && ok2 && !maps.Equal(o.Labels, n.Labels):
				c.requeueAll()
			case !ok1 || !ok2 || o.ResourceVersion != n.ResourceVersion:
				// Read as namespaceObject, it changes what a trigger in it
				// generates: the next sync of each policy that reads it
				// sees it whole. No other policy reads more of it than its
				// labels.
				c.markNamespaceReadersFull()
			}
		},
	}); err != nil {
		return err
	}
	// The Namespace cache starts with the first policy whose triggers are
	// namespaced (needNamespaces): with Namespaces as triggers only, it
	// would list every Namespace a second time for nothing.
	//
	// The records, the policies and who the controller is (Identify) are
	// read at once: each is a round trip the others need not wait for. A
	// policy delivered by a source resumes from its record, so the sources'
	// policies wait in the handler until the records are in; then it is
	// compiled and its triggers watched, while the controller may still
	// be asking who it is (a proof met meanwhile waits for the key), and
	// no policy is synced before it knows.
	c.log.Info("waiting for the PolicyInventory records and the policy sources to be read", "sources", len(c.opts.Sources))
	records := c.ledger.Start(ctx, c.opts.RecordShardSize)
	recordsIn, identified := newIntakeGate(), newIntakeGate()
	go func() {
		err := c.identify(ctx)
		c.proof.Abandon() // given by then, if at all
		if err != nil {
			identified.shut(err)
			return
		}
		identified.open()
	}()
	go func() {
		if !cache.WaitFor(ctx, "", records) {
			recordsIn.shut(fmt.Errorf("inventory records did not sync: %w", ctx.Err()))
			return
		}
		recordsIn.open()
	}()
	h := policyHandler{c: c, records: recordsIn}
	var synced []cache.InformerSynced
	for _, src := range c.opts.Sources {
		if err := src.Start(ctx, h); err != nil {
			return err
		}
		synced = append(synced, src.HasSynced)
		if !c.opts.DryRun {
			c.tell.Sources().Queue(src.Name())
		}
	}
	if err := recordsIn.wait(); err != nil {
		return err
	}
	if err := identified.wait(); err != nil {
		return err
	}
	if !waitSynced(ctx, synced...) {
		return fmt.Errorf("informer caches did not sync: %w", ctx.Err())
	}
	return nil
}

// identify calls Options.Identify, if set: the error of a stop meanwhile
// is the stop's.
func (c *Controller) identify(ctx context.Context) error {
	if c.opts.Identify == nil {
		return nil
	}
	err := c.opts.Identify(ctx)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// stop stops what start started.
func (c *Controller) stop() {
	c.intake.stopTriggerInformers()
	c.intake.informers.Shutdown()
	c.rights.RBAC().Shutdown()
	for _, src := range c.opts.Sources {
		src.Wait()
	}
}

// run schedules resyncs and runs the workers until ctx is done.
func (c *Controller) run(ctx context.Context) error {
	if c.opts.ResyncSchedule != "" {
		stop, err := c.scheduleResync(c.opts.ResyncSchedule)
		if err != nil {
			return err
		}
		defer stop()
	}
	c.synced.Store(true)
	defer c.synced.Store(false)
	c.log.Info("started", "workers", c.opts.Workers)
	var wg sync.WaitGroup
	// Sources' states are written once each has delivered what it held at
	// start, so a restart does not write a partial count.
	wg.Go(func() { c.tell.Sources().Run(ctx) })
	wg.Go(func() { c.rights.RBAC().Watch(ctx, c.ctx.Done()) })
	wg.Go(func() { c.rights.RBAC().RunRechecks(ctx, c.recheckPermissions) })
	wg.Go(func() { c.tell.RunReports(ctx) })
	for range c.opts.Workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	// Status writes outlive ctx: what the last syncs did is written before
	// Run returns, so a restart finds it written and has nothing to write.
	stopStatus := c.tell.StartStatusWorkers(ctx)
	<-ctx.Done()
	c.queue.ShutDown()
	c.tell.Sources().ShutDown()
	wg.Wait()
	stopStatus()
	c.stop()
	return nil
}

// Synced reports whether the controller's caches and sources have synced
// and it is syncing policies: what a readiness probe asks.
func (c *Controller) Synced() bool { return c.synced.Load() }

// runWorker processes queue keys until the queue shuts down.
func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

// processNextWorkItem syncs one policy. An error re-queues it with back-off;
// success forgets its failure history.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	start := time.Now()
	c.states.Of(key).Begin()
	err := c.pipeline.sync(ctx, key)
	if errors.Is(err, errWaiting) {
		// Backs off (100 ms doubling to at most 3.2 s) and says so once it
		// has lasted: a cache that never syncs (RBAC forbids the list, a CRD
		// was removed) must not be a silent hot loop.
		// A policy forgotten meanwhile (deleted while its sync waited)
		// keeps no count and says 0: it waits as on a first time.
		n := max(c.states.Of(key).Waited(), 1)
		if n%20 == 0 {
			c.log.Warn("still waiting for caches to sync", "policy", key.String(), "attempts", n)
		}
		c.queue.AddAfter(key, 100*time.Millisecond<<min(n-1, 5))
		return true
	}
	c.states.Of(key).Done()
	if c.opts.OnSync != nil {
		c.opts.OnSync(key.String(), err)
	}
	if err != nil && ctx.Err() != nil {
		return false // shutting down: the error is the cancellation
	}
	if err != nil {
		c.log.Error("sync failed", "policy", key.String(), "error", err.Error(), "duration", time.Since(start))
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// requeueAll queues every policy.
func (c *Controller) requeueAll() {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for key := range c.policies {
		c.queue.Add(key)
	}
}

// scheduleResync queues every policy on the cron schedule: a full recompute
// that writes only where something drifted.
func (c *Controller) scheduleResync(spec string) (stop func(), err error) {
	schedule, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("resync schedule %q: %w", spec, err)
	}
	cr := cron.New()
	cr.Schedule(schedule, cron.FuncJob(func() {
		c.log.Info("resync: recomputing every policy")
		c.kinds.Resync() // discovery asked again
		c.intake.forgetSettledChecks()
		c.rights.RBAC().Changed() // and permissions, if RBAC changes were missed
		c.requeueAll()
	}))
	cr.Start()
	return func() { <-cr.Stop().Done() }, nil
}

// syncPollPeriod is how often waitSynced looks: client-go's
// WaitForCacheSync looks every 100 ms, which a start-up would wait for
// once more after a list of milliseconds.
const syncPollPeriod = 5 * time.Millisecond

// waitSynced waits until every synced reports true, or ctx ends; it
// reports whether they did.
func waitSynced(ctx context.Context, synced ...cache.InformerSynced) bool {
	err := wait.PollUntilContextCancel(ctx, syncPollPeriod, true, func(context.Context) (bool, error) {
		for _, s := range synced {
			if !s() {
				return false, nil
			}
		}
		return true, nil
	})
	return err == nil
}

// markNamespaceReadersFull makes the next sync of every policy that reads
// namespaceObject, or that an exception reading it names, a full one,
// without queueing any: a change that never queued a policy before (a
// Namespace's annotations) is still seen whole when something else does.
// Every other policy goes on syncing incrementally: marking them all, every
// change to any Namespace (an annotation a controller sets, each step of a
// deletion) cost each policy a sync of all its triggers.
func (c *Controller) markNamespaceReadersFull() {
	named := c.eval.NamedByNamespaceReaders()
	// Marked under the lock, as policies enter and leave: a mark left for
	// a policy gone would outlive it.
	c.mu.RLock()
	defer c.mu.RUnlock()
	for key, cp := range c.policies {
		if cp.Program.ReadsNamespace() || named(key) {
			c.queue.MarkFull(key)
		}
	}
}
