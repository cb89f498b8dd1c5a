package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/sources"
)

// Options configure a Controller.
type Options struct {
	// Workers is how many policies sync at once.
	Workers int
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Sources deliver the policies to run; none means the policies stored
	// in the cluster.
	Sources []sources.Source
	// ResyncSchedule is a cron spec (robfig/cron: "0 * * * *", "@hourly",
	// "@every 10m") for full recomputes of every policy, repairing drift no
	// event reported; empty means never.
	ResyncSchedule string
	// RecordShardSize is how many admitted and generated entries one
	// PolicyInventory holds before it is split over shards; 0 is the default.
	RecordShardSize int
	// MaxObjectsPerTrigger bounds how many objects one evaluation may
	// generate; more is an evaluation error. A policy's annotation
	// sprout.dev/max-objects-per-trigger overrides it.
	MaxObjectsPerTrigger int
	// EvaluationTimeout bounds one evaluation of a policy for one trigger
	// by the wall clock; longer is an evaluation error. 0 is
	// celenv.DefaultEvaluationTimeout.
	EvaluationTimeout time.Duration
	// AllowedKinds, when not empty, are the only kinds Sprout generates;
	// others are refused.
	AllowedKinds []schema.GroupKind
	// AllowWildcardBindings permits generating RoleBindings and
	// ClusterRoleBindings to roles that grant too much (guardedGrants:
	// every verb on every resource, escalate, bind, impersonate...); they
	// are refused otherwise.
	AllowWildcardBindings bool
	// DefaultServiceAccount is the name of the account, in its own
	// namespace, a NamespacedGeneratingPolicy without the
	// sprout.dev/service-account annotation runs as; empty means Sprout's
	// own, which gives every tenant Sprout's rights in their namespace.
	// DefaultOptions sets DefaultServiceAccount (the constant).
	DefaultServiceAccount string
	// ServiceAccountNamespaces are the namespaces whose ServiceAccounts a
	// GeneratingPolicy may name in sprout.dev/service-account; none by
	// default. Sprout's RBAC must let it impersonate them there too.
	ServiceAccountNamespaces []string
	// ProtectedNamespaces are namespaces whose Secrets, tokens and
	// accounts are the cluster's (kube-system, Sprout's own): the binding
	// guard judges a RoleBinding there as it judges a ClusterRoleBinding.
	ProtectedNamespaces []string
	// TriggerEvents also emits an Event on each trigger for what was
	// generated for it; off by default, as it costs a write per trigger.
	TriggerEvents bool
	// DryRun makes a controller that only plans (Plan): it computes what
	// each policy would write and prune, asks the API server with dry-run
	// applies, and writes nothing (no objects, records, status or Events).
	DryRun bool
	// Metrics receives the controller's Prometheus series; nil keeps them
	// unregistered.
	Metrics prometheus.Registerer
	// OnSync, when set, is called after every sync of a policy with its key
	// (Kind/[namespace/]name) and result. Tests wait on it instead of sleeping.
	OnSync func(policy string, err error)
}

// DefaultOptions returns the options `sprout run` starts with.
func DefaultOptions() Options {
	return Options{Workers: 4, ResyncSchedule: "@hourly", MaxObjectsPerTrigger: DefaultMaxObjectsPerTrigger,
		EvaluationTimeout: celenv.DefaultEvaluationTimeout, DefaultServiceAccount: DefaultServiceAccount,
		ProtectedNamespaces: []string{"kube-system", "kube-public", "kube-node-lease"}}
}

// Controller runs GeneratingPolicies and NamespacedGeneratingPolicies found
// in the cluster.
type Controller struct {
	opts    Options
	log     *slog.Logger
	dynamic dynamic.Interface
	// raw watches triggers and Sprout's objects (see eventDecoder).
	raw       rest.Interface
	kube      kubernetes.Interface
	cfg       *rest.Config
	accounts  accounts
	discovery discovery.CachedDiscoveryInterface
	mapper    meta.ResettableRESTMapper
	// mappings keeps restMapping's answers, by kind, until the mapper is
	// reset: a sync maps every object it writes.
	mappings sync.Map
	// resynced keeps, after a resync forgot them, the mappings known
	// before: while discovery cannot answer (the API server down at the
	// resync), a kind known before maps as it did, instead of every lookup
	// asking discovery again.
	resynced sync.Map
	// downstreamEvents counts the changes to each policy's objects.
	downstreamEvents downstreamEvents
	applier          *inventory.Applier
	// writer applies and prunes: the applier, or its dry run.
	writer writer
	// reporter writes records, status, Events and metrics, or, dry, keeps
	// the plan.
	reporter reporter
	// planned holds what each policy's last sync did or, dry, would do.
	planned plans

	kubeInformers informers.SharedInformerFactory
	// rbacInformers watch roles and bindings, for the binding guard and
	// for permission rechecks, apart from kubeInformers so that starting
	// them starts nothing else.
	rbacInformers informers.SharedInformerFactory
	// access keeps access reviews' answers until RBAC changes; rechecks
	// asks for the policies' permissions to be checked again, once
	// rbacWatched says RBAC changes are seen.
	access      accessCache
	rechecks    chan struct{}
	rbacWatched atomic.Bool
	// namespacedResources says, per resource discovery listed, whether it
	// is namespaced.
	namespacedResources sync.Map
	namespaces          listersv1.NamespaceLister
	matcher             *Matcher

	queue workqueue.TypedRateLimitingInterface[policyKey]
	// statusQueue holds the policies whose last outcome is not yet written
	// to their status; reports holds the outcomes.
	statusQueue workqueue.TypedRateLimitingInterface[policyKey]
	reports     reports
	// sourceQueue holds the names of sources whose PolicySource may be stale.
	sourceQueue  workqueue.TypedRateLimitingInterface[string]
	sourceStates sourceStates
	events       record.EventRecorder
	broadcaster  record.EventBroadcaster
	eventSink    typedcorev1.EventInterface
	metrics      *metrics

	mu       sync.RWMutex
	policies map[policyKey]*compiledPolicy
	informer map[watchKey]*triggerInformer
	// dependencies are the resources each policy read in its last sync.
	dependencies map[policyKey]sets.Set[schema.GroupVersionResource]
	// downstream are label-selected informers on the resources generated into.
	downstream map[schema.GroupVersionResource]*triggerInformer
	// written are the resources each policy has generated objects of.
	written map[policyKey]sets.Set[schema.GroupVersionResource]
	// generated are the objects (per trigger) each non-synchronizing policy
	// has created or found: they are never generated again; for a
	// synchronizing policy, the objects it claims (ownership.go).
	generated map[policyKey]sets.Set[string]
	// deleted holds policies gone from their source until their sync has
	// cleaned up after them.
	deleted map[policyKey]retired
	// records reads PolicyInventory records from their cache and writes
	// them; set by Run.
	records *inventory.Records
	ctx     context.Context // the context Run was called with, for informers started later

	// synced is set once every cache and source has delivered what it held
	// at start: before that the controller cannot tell what is missing.
	synced atomic.Bool

	admitted   admissions
	failures   failures
	conflicts  seen
	tombstones tombstones
	claims     claims
	waits      waits
	// guard judges the roles generated bindings refer to.
	guard roleGuard

	// rebuilds are the policies whose records are rebuilt from their
	// objects; selfTriggers, how many of its own objects each passed over.
	rebuilds     rebuilds
	selfTriggers selfTriggers
	own          ownObjects
	// syncs can stop the syncs under way of deleted policies.
	syncs syncs
}

// complete fills in what the options leave unset, and checks the accounts
// flags.
func (o Options) complete() (Options, error) {
	if o.Workers < 1 {
		o.Workers = 1
	}
	if o.MaxObjectsPerTrigger < 1 {
		o.MaxObjectsPerTrigger = DefaultMaxObjectsPerTrigger
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, ValidateServiceAccountOptions(o)
}

// New connects a Controller to the cluster at cfg. Nothing runs until Run.
func New(cfg *rest.Config, opts Options) (*Controller, error) {
	opts, err := opts.complete()
	if err != nil {
		return nil, err
	}
	// controller-runtime's client logs through its own global logger; send
	// it to ours.
	ctrllog.SetLogger(logr.FromSlogHandler(opts.Logger.Handler()))
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	raw, err := newRawClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("REST client: %w", err)
	}
	applier, err := inventory.NewApplier(cfg)
	if err != nil {
		return nil, err
	}
	if len(opts.Sources) == 0 {
		opts.Sources = []sources.Source{sources.NewCluster(dyn)}
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	broadcaster := record.NewBroadcaster()
	disco := memory.NewMemCacheClient(kube.Discovery())
	factory := informers.NewSharedInformerFactory(kube, 0)
	nsInformer := factory.Core().V1().Namespaces()
	c := &Controller{
		kube:          kube,
		cfg:           cfg,
		opts:          opts,
		log:           opts.Logger,
		dynamic:       dyn,
		raw:           raw,
		discovery:     disco,
		mapper:        restmapper.NewDeferredDiscoveryRESTMapper(disco),
		applier:       applier,
		kubeInformers: factory,
		rbacInformers: informers.NewSharedInformerFactory(kube, 0),
		rechecks:      make(chan struct{}, 1),
		namespaces:    nsInformer.Lister(),
		matcher:       NewMatcher(nsInformer.Lister(), kube),
		queue:         newQueue[policyKey]("policies", m),
		statusQueue:   newQueue[policyKey]("status", m),
		sourceQueue:   newQueue[string]("sources", m),
		sourceStates:  sourceStates{checks: map[string]sources.Status{}, live: map[string]*sproutv1alpha1.PolicySource{}},
		broadcaster:   broadcaster,
		eventSink:     kube.CoreV1().Events(""),
		events:        broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "sprout"}),
		metrics:       m,
		policies:      map[policyKey]*compiledPolicy{},
		informer:      map[watchKey]*triggerInformer{},
		dependencies:  map[policyKey]sets.Set[schema.GroupVersionResource]{},
		downstream:    map[schema.GroupVersionResource]*triggerInformer{},
		written:       map[policyKey]sets.Set[schema.GroupVersionResource]{},
		deleted:       map[policyKey]retired{},
		generated:     map[policyKey]sets.Set[string]{},
	}
	c.writer = c.writerOf(applier)
	c.reporter = liveReporter{c}
	if opts.DryRun {
		c.reporter = planReporter{c}
	}
	if opts.Metrics != nil {
		if err := c.registerInformerGauges(opts.Metrics); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return c, nil
}

// writerOf is how the controller writes through applier: as it is, or, in
// a dry run, its dry run.
func (c *Controller) writerOf(applier *inventory.Applier) writer {
	if c.opts.DryRun {
		return applier.DryRun()
	}
	return applier
}

// restMapping maps a kind to its resource. A kind the cached discovery does
// not know (a CRD installed since) resets the cache once and asks again.
func (c *Controller) restMapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	if m, ok := c.mappings.Load(gvk); ok {
		return m.(*meta.RESTMapping), nil
	}
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.resetMapper()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil && !meta.IsNoMatchError(err) {
		if known, ok := c.resynced.Load(gvk); ok {
			m, err = known.(*meta.RESTMapping), nil
		}
	}
	if err == nil {
		c.mappings.Store(gvk, m)
	}
	return m, err
}

// resetMapper forgets what discovery found, so that it is asked again.
func (c *Controller) resetMapper() {
	c.mapper.Reset()
	c.mappings.Clear()
}

// newQueue makes a rate-limited work queue whose metrics are named name.
func newQueue[T comparable](name string, m *metrics) workqueue.TypedRateLimitingInterface[T] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[T](),
		workqueue.TypedRateLimitingQueueConfig[T]{Name: name, MetricsProvider: m.queue})
}

// Run starts the informers and workers and blocks until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	if c.opts.DryRun {
		return errors.New("a dry-run controller only plans: call Plan")
	}
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	defer c.sourceQueue.ShutDown()
	defer c.statusQueue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.eventSink})
	defer c.broadcaster.Shutdown()

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
	c.ctx = ctx
	c.mu.Unlock()

	// A Namespace's labels decide namespaceSelector matches and are read as
	// namespaceObject: when they change, every policy is recomputed.
	if _, err := c.kubeInformers.Core().V1().Namespaces().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Namespace)
			n, ok2 := obj.(*corev1.Namespace)
			if ok1 && ok2 && !maps.Equal(o.Labels, n.Labels) {
				c.requeueAll()
			}
		},
	}); err != nil {
		return err
	}
	// The Namespace cache starts with the first policy whose triggers are
	// namespaced (needNamespaces): with Namespaces as triggers only, it
	// would list every Namespace a second time for nothing.
	// Records first: a policy delivered by a source resumes from its record.
	c.log.Info("waiting for the PolicyInventory records and the policy sources to be read", "sources", len(c.opts.Sources))
	if !cache.WaitFor(ctx, "", c.startRecords(ctx)) {
		return fmt.Errorf("inventory records did not sync: %w", ctx.Err())
	}
	var synced []cache.InformerSynced
	for _, src := range c.opts.Sources {
		if err := src.Start(ctx, policyHandler{c}); err != nil {
			return err
		}
		synced = append(synced, src.HasSynced)
		if !c.opts.DryRun {
			c.sourceQueue.Add(src.Name())
		}
	}
	if !waitSynced(ctx, synced...) {
		return fmt.Errorf("informer caches did not sync: %w", ctx.Err())
	}
	return nil
}

// stop stops what start started.
func (c *Controller) stop() {
	c.stopTriggerInformers()
	c.kubeInformers.Shutdown()
	c.rbacInformers.Shutdown()
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
	wg.Go(func() { c.runSourceWorker(ctx) })
	wg.Go(func() { c.watchRBAC(ctx) })
	wg.Go(func() { c.runPermissionRechecks(ctx) })
	for range c.opts.Workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	// Status writes outlive ctx: what the last syncs did is written before
	// Run returns, so a restart finds it written and has nothing to write.
	statusCtx := context.WithoutCancel(ctx)
	var statusWG sync.WaitGroup
	for range statusWorkers {
		statusWG.Go(func() { c.runStatusWorker(statusCtx) })
	}
	<-ctx.Done()
	c.queue.ShutDown()
	c.sourceQueue.ShutDown()
	wg.Wait()
	c.statusQueue.ShutDown()
	statusWG.Wait()
	drain, stopDrain := context.WithTimeout(statusCtx, statusDrainTimeout)
	c.writePending(drain)
	stopDrain()
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
	err := c.sync(ctx, key)
	if errors.Is(err, errWaiting) {
		// Backs off (100 ms doubling to at most 3.2 s) and says so once it
		// has lasted: a cache that never syncs (RBAC forbids the list, a CRD
		// was removed) must not be a silent hot loop.
		n := c.waits.add(key)
		if n%20 == 0 {
			c.log.Warn("still waiting for caches to sync", "policy", key.String(), "attempts", n)
		}
		c.queue.AddAfter(key, 100*time.Millisecond<<min(n-1, 5))
		return true
	}
	c.waits.reset(key)
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
		c.resynced.Clear()
		c.mappings.Range(func(k, v any) bool { c.resynced.Store(k, v); return true })
		c.resetMapper() // and discovery with it
		c.forgetSettledChecks()
		c.rbacChanged() // and permissions, if RBAC changes were missed
		c.requeueAll()
	}))
	cr.Start()
	return func() { <-cr.Stop().Done() }, nil
}

// waits counts, per policy, the syncs in a row that had to wait for a cache.
type waits struct {
	mu sync.Mutex
	n  map[policyKey]int
}

func (w *waits) add(k policyKey) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[policyKey]int{}
	}
	w.n[k]++
	return w.n[k]
}

func (w *waits) reset(k policyKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.n, k)
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
