package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/internal/procs"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/policyreport"
	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/evaluate"
	"github.com/sprout-gitops/sprout/reconcile/kinds"
	"github.com/sprout-gitops/sprout/reconcile/ledger"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/queue"
	"github.com/sprout-gitops/sprout/reconcile/report"
	"github.com/sprout-gitops/sprout/reconcile/watches"
	"github.com/sprout-gitops/sprout/sources"
)

// Options configure a Controller.
type Options struct {
	// Workers is how many policies sync at once.
	Workers int
	// TriggersInFlight bounds the triggers that full syncs hold evaluated
	// and not yet applied, all syncs together (0: DefaultTriggersInFlight;
	// at least one part, 256). Incremental syncs take nothing from it.
	TriggersInFlight int
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Sources deliver the policies to run; none means the policies stored
	// in the cluster.
	Sources []sources.Source
	// ResyncSchedule is a cron spec (robfig/cron: "0 * * * *", "@hourly",
	// "@every 10m") for full recomputes of every policy, repairing drift no
	// event reported; empty means never.
	ResyncSchedule string
	// Shard names this replica's shard of the policies, when its sources
	// select some of them: its PolicySources are named after it, so that
	// shards do not write over each other's counts. Empty: one for all.
	Shard string
	// RecordShardSize is how many admitted and generated entries one
	// PolicyInventory holds before it is split over shards; 0 is the default.
	RecordShardSize int
	// MaxObjectsPerTrigger bounds how many objects one evaluation may
	// generate; more is an evaluation error. A policy's annotation
	// sprout.dev/max-objects-per-trigger overrides it.
	MaxObjectsPerTrigger int
	// BlastRadius is the threshold of the blast-radius guard for the
	// policies without the annotation sprout.dev/blast-radius: a count
	// ("10"), a percentage of a policy's objects ("20%"), or "off" (also
	// ""), the default, which writes every revision at once as Kyverno does.
	BlastRadius string
	// EvaluationTimeout bounds one evaluation of a policy for one trigger
	// by the wall clock; longer is an evaluation error. 0 is
	// celenv.DefaultEvaluationTimeout.
	EvaluationTimeout time.Duration
	// TenantCPUShare is the share of one processor a tenant's evaluations
	// (the NamespacedGeneratingPolicies of one namespace) may take on
	// average, after a burst of TenantCPUBurst; past it the tenant's next
	// evaluation waits until the share has paid it back. 0 charges
	// nothing. DefaultOptions sets DefaultTenantCPUShare.
	TenantCPUShare float64
	// MaxChain bounds how many policies a chain of generated objects may
	// pass through, where policies opt in to triggering on what others
	// generated (skipBackgroundRequests false); a cycle stops at once.
	// 0 is DefaultMaxChain.
	MaxChain int
	// HTTP makes the policies' http.Get, Post and Put calls, to the hosts
	// it allows; nil allows none. Each sync of a policy is one round of
	// its cache.
	HTTP *celenv.HTTP
	// GlobalContext serves globalContext.Get; nil finds no entry. The
	// caller runs it; a change of an entry re-syncs the policies that read
	// it.
	GlobalContext evaluate.GlobalContext
	// AllowedKinds, when not empty, are the only kinds Sprout generates;
	// others are refused.
	AllowedKinds []schema.GroupKind
	// AllowUnnamedGrants lets a policy that acts as Sprout itself (a
	// GeneratingPolicy without sprout.dev/service-account) write objects
	// that grant rights: RBAC objects, admission webhooks, APIServices,
	// certificates, ServiceAccount tokens and anything that runs a
	// workload (access.GrantsRights). Off, such objects are refused: the
	// policy must name an account, whose writes the API server judges.
	AllowUnnamedGrants bool
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
	// PolicyExceptions applies the PolicyExceptions of the sources, as
	// Kyverno's --enablePolicyException: off, they are not read.
	PolicyExceptions bool
	// ExceptionNamespace is the only namespace whose PolicyExceptions
	// count, as Kyverno's --exceptionNamespace; "" or "*" means every one.
	ExceptionNamespace string
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
	// PolicyReports, when set, writes a PolicyReport for each trigger with
	// the result of each policy, as Kyverno does; nil writes none.
	// DefaultOptions sets it, as Kyverno reports by default.
	PolicyReports *policyreport.Options
	// ProofKey is the key Sprout signs the origin of the objects it
	// generates with, and without which it prunes or claims none
	// (cluster.ProofKey): at least cluster.MinProofKeyBytes, the same
	// across restarts and replicas. Without one (Controller.Prove may give
	// it later), objects whose managed fields say Sprout wrote their origin
	// count as proven, as before proofs: what a plan needs, which holds no
	// key, and no controller that writes should run so.
	ProofKey []byte
	// Identify, when set, is called as Run starts, while the records, the
	// policies and their triggers are read: what the controller needs
	// before its first sync and need not wait for before reading. `sprout
	// run` reads its proof key and its own namespaces there (Prove,
	// Protect); without ProofKey, a proof met meanwhile is verified once
	// the key is known. No policy is synced before it returns; its error
	// ends Run.
	Identify func(ctx context.Context) error
	// OnSync, when set, is called after every sync of a policy with its key
	// (Kind/[namespace/]name) and result. Tests wait on it instead of sleeping.
	OnSync func(policy string, err error)
}

// DefaultTenantCPUShare is Options.TenantCPUShare's default: a quarter of
// a processor for each tenant on average. A tenant's evaluations of a few
// milliseconds never reach it; one whose evaluations spin to their time
// limit as fast as its triggers change would otherwise hold a processor
// for good.
const DefaultTenantCPUShare = 0.25

// TenantCPUBurst is how long a tenant's evaluations may run at once before
// Options.TenantCPUShare holds it: a full sync of thousands of triggers.
const TenantCPUBurst = time.Second

// ValidateTenantCPUShare checks a share as Options.TenantCPUShare takes it.
func ValidateTenantCPUShare(share float64) error { return evaluate.ValidateShare(share) }

// DefaultOptions returns the options `sprout run` starts with.
func DefaultOptions() Options {
	return Options{Workers: 4, ResyncSchedule: "@hourly", MaxObjectsPerTrigger: DefaultMaxObjectsPerTrigger,
		EvaluationTimeout: celenv.DefaultEvaluationTimeout, MaxChain: DefaultMaxChain, DefaultServiceAccount: DefaultServiceAccount,
		TenantCPUShare:      DefaultTenantCPUShare,
		ProtectedNamespaces: []string{"kube-system", "kube-public", "kube-node-lease"}, PolicyReports: new(policyreport.DefaultOptions())}
}

// AnnotationMaxObjectsPerTrigger on a policy overrides
// Options.MaxObjectsPerTrigger for it.
const AnnotationMaxObjectsPerTrigger = "sprout.dev/max-objects-per-trigger"

// DefaultMaxObjectsPerTrigger bounds what one evaluation may generate.
const DefaultMaxObjectsPerTrigger = 1000

// maxObjects is the cap on the objects one trigger may generate for a
// policy: its annotation's, or otherwise.
func maxObjects(cp *policy.Compiled, otherwise int) (int, error) {
	v, ok := cp.Policy.GetAnnotations()[AnnotationMaxObjectsPerTrigger]
	if !ok {
		return otherwise, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("metadata.annotations[%s]: %q is not a positive number", AnnotationMaxObjectsPerTrigger, v)
	}
	return n, nil
}

// Controller runs GeneratingPolicies and NamespacedGeneratingPolicies found
// in the cluster.
type Controller struct {
	opts Options
	log  *slog.Logger
	// kinds answers what discovery knows of kinds and resources.
	kinds *kinds.Kinds
	// eval evaluates policies for triggers, and keeps the sources'
	// PolicyExceptions.
	eval *evaluate.Evaluator
	// created pairs the versions every writer's creates made with the
	// events of the generated objects' informers.
	created *cluster.CreatedVersions
	// proof signs the objects generated and verifies their proofs.
	proof *cluster.ProofKey
	// pipeline syncs one policy at a time: the sync's phases.
	pipeline *syncer

	// rights answers what policies' rights allow.
	rights *access.Rights

	queue *queue.Queue
	// reads index what each trigger's evaluation read, so that a change of
	// it queues that trigger alone (deps.go).
	reads *watches.ReadIndex[policy.Key]
	// tell writes the policies' status and Events, the PolicyReports and
	// the PolicySources.
	tell    *report.Teller
	metrics *report.Metrics

	// intake receives the informers' events and starts and stops them.
	intake *intake

	mu       sync.RWMutex
	policies map[policy.Key]*policy.Compiled
	// deleted holds policies gone from their source until their sync has
	// cleaned up after them.
	deleted map[policy.Key]retired
	ctx     context.Context // the context Run was called with, for informers started later

	// synced is set once every cache and source has delivered what it held
	// at start: before that the controller cannot tell what is missing.
	synced atomic.Bool

	// states are what is kept of each policy between its syncs.
	states *states
	// ledger keeps the records, what each policy generated and claims,
	// and which source holds each policy name.
	ledger *ledger.Ledger
	// syncs can stop the syncs under way of deleted policies.
	syncs queue.Running
}

// complete fills in what the options leave unset, and checks the accounts
// flags.
func (o Options) complete() (Options, error) {
	if o.Workers < 1 {
		o.Workers = 1
	}
	if o.MaxChain < 1 {
		o.MaxChain = DefaultMaxChain
	}
	if o.TriggersInFlight < 1 {
		o.TriggersInFlight = DefaultTriggersInFlight
	}
	o.TriggersInFlight = max(o.TriggersInFlight, maxPart)
	if o.MaxObjectsPerTrigger < 1 {
		o.MaxObjectsPerTrigger = DefaultMaxObjectsPerTrigger
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := ValidateTenantCPUShare(o.TenantCPUShare); err != nil {
		return o, fmt.Errorf("TenantCPUShare: %w", err)
	}
	return o, ValidateServiceAccountOptions(o)
}

// New connects a Controller to the cluster at cfg. Nothing runs until Run.
func New(cfg *rest.Config, opts Options) (*Controller, error) {
	opts, err := opts.complete()
	if err != nil {
		return nil, err
	}
	// controller-runtime's client logs through its global logger: to ours.
	ctrllog.SetLogger(logr.FromSlogHandler(opts.Logger.Handler()))
	kube, dyn, raw, err := clientsFor(cfg)
	if err != nil {
		return nil, err
	}
	proof, err := cluster.NewProofKey(opts.ProofKey)
	if err != nil {
		return nil, fmt.Errorf("ProofKey: %w", err)
	}
	if opts.ProofKey == nil && opts.Identify != nil {
		// Identify may give it (Prove): the triggers are read meanwhile.
		proof.Pending()
	}
	created := new(cluster.CreatedVersions)
	known := kinds.New(kube.Discovery())
	// How the controller writes as cfg's identity: through an Applier or,
	// in a dry run, its dry run.
	writerAs := func(cfg *rest.Config) (writer, error) {
		a, err := inventory.NewApplier(cfg, created, known.RESTMapper())
		switch {
		case err != nil:
			return nil, err
		case opts.DryRun:
			return a.DryRun(), nil
		}
		return a, nil
	}
	w, err := writerAs(cfg)
	if err != nil {
		return nil, err
	}
	opts.Sources = sourcesOf(opts, dyn)
	m, err := report.NewMetrics(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	nsInformer := factory.Core().V1().Namespaces()
	c := &Controller{
		opts:     opts,
		log:      opts.Logger,
		kinds:    known,
		created:  created,
		proof:    proof,
		queue:    queue.New(m, opts.Workers),
		metrics:  m,
		policies: map[policy.Key]*policy.Compiled{},
		deleted:  map[policy.Key]retired{},
		reads:    &watches.ReadIndex[policy.Key]{},
		states:   &states{},
	}
	writers := access.NewWriters(cfg, w, writerAs)
	c.rights = access.New(access.Config{Options: opts.access(), Kube: kube, Log: opts.Logger, Discovery: c.kinds, RoleChanged: c.roleChanged,
		WatchNamespace: func(scope string, gvr schema.GroupVersionResource) string {
			return c.intake.watchKeyOf(scope, gvr).Namespace
		}})
	in := &intake{policies: c.withPolicies, states: c.states, queue: c.queue, reads: c.reads, kinds: c.kinds,
		informers: factory, rights: c.rights, created: created}
	c.intake = in
	in.triggers = watches.NewTriggers(dyn, raw, c.proof, opts.Logger, triggerEvents{in})
	in.generated = watches.NewGenerated(dyn, raw, created, c.proof, in.servedInProtobuf, opts.Logger, generatedEvents{in})
	// The evaluator reads the generated objects' caches: made after them.
	c.eval = newEvaluator(c, nsInformer.Lister(), kube)
	c.ledger = ledger.New(ledgerCore{c}, in.generated, dyn, c.proof, opts.Logger)
	if c.tell, err = c.teller(cfg, dyn, kube.CoreV1().Events("")); err != nil {
		return nil, err
	}
	in.eval, in.tell, in.ledger = c.eval, c.tell, c.ledger
	c.pipeline = newSyncer(c, writers)
	if opts.GlobalContext != nil {
		opts.GlobalContext.Notify(c.intake.entryChanged)
	}
	if opts.Metrics != nil {
		if err := report.RegisterInformerGauges(opts.Metrics, c.intake.runningInformers, c.intake.informerSizes); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return c, nil
}

// teller makes what tells the outcomes of the controller's syncs. A
// controller that only plans writes no PolicyReports.
func (c *Controller) teller(cfg *rest.Config, dyn dynamic.Interface, events typedcorev1.EventInterface) (*report.Teller, error) {
	reports := c.opts.PolicyReports
	if c.opts.DryRun {
		reports = nil
	}
	return report.NewTeller(report.TellerOptions{
		Core: report.TellerCore{
			Policy: func(key policy.Key) *policy.Compiled {
				c.mu.RLock()
				defer c.mu.RUnlock()
				return c.policies[key]
			},
			Told:   func(key policy.Key) *report.Told { return c.states.Of(key).Told() },
			Record: c.ledger.Record,
			SaveRecordStatus: func(ctx context.Context, key policy.Key, cp *policy.Compiled, out report.Outcome) error {
				return c.ledger.SaveStatus(ctx, key, cp, out, reconcileRequest(cp.Policy))
			},
		},
		Client: dyn, EventSink: events, TriggerEvents: c.opts.TriggerEvents,
		Config: cfg, PolicyReports: reports, ReportsYield: func(ctx context.Context) { c.syncs.Quiet(ctx, reportsYield) },
		Sources: report.SourcesOptions{Client: dyn, Sources: c.opts.Sources, Shard: c.opts.Shard, Census: c.ledger.Names().OfSource},
		Metrics: c.metrics, Log: c.log,
	})
}

// newEvaluator makes c's evaluator, which reads the Namespaces from
// namespaces, or from kube when not cached yet, and the rest from c.
func newEvaluator(c *Controller, namespaces listersv1.NamespaceLister, kube kubernetes.Interface) *evaluate.Evaluator {
	o := c.opts
	return evaluate.New(evaluate.Config{Log: o.Logger, Timeout: o.EvaluationTimeout, HTTP: o.HTTP, GlobalContext: o.GlobalContext,
		Exceptions: o.PolicyExceptions, ExceptionNamespace: o.ExceptionNamespace, Namespaces: namespaces, Client: kube,
		Kinds: c.kinds, Live: c.intake.live(), Proof: c.proof, Cache: c.intake.readCache, Requeue: func(key policy.Key) { c.queue.Add(key) },
		Cores: evaluate.NewCores(0).Budget(o.TenantCPUShare, TenantCPUBurst).Waits(func(tenant string, owed time.Duration) {
			o.Logger.Info("a tenant's evaluations wait: they ran past its share of a processor (--tenant-cpu-share)",
				"namespace", tenant, "wait", owed.Round(time.Millisecond).String(), "share", o.TenantCPUShare)
		}).Holding(procs.Hold),
		LastUpdate: func(cp *policy.Compiled, gvr schema.GroupVersionResource, uid types.UID) *cluster.Object {
			return c.intake.lastUpdate(c.intake.triggerKeyOf(cp, gvr), uid)
		}})
}

// clientsFor makes the clients the controller reads the cluster through.
func clientsFor(cfg *rest.Config) (*kubernetes.Clientset, *dynamic.DynamicClient, rest.Interface, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("dynamic client: %w", err)
	}
	raw, err := cluster.NewRawClient(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("REST client: %w", err)
	}
	return kube, dyn, raw, nil
}

// sourcesOf are the policy sources of opts, the cluster when none is
// given; a cluster source reads PolicyExceptions too when they are on.
func sourcesOf(opts Options, dyn dynamic.Interface) []sources.Source {
	srcs := opts.Sources
	if len(srcs) == 0 {
		srcs = []sources.Source{sources.NewCluster(dyn)}
	}
	if opts.PolicyExceptions {
		for _, src := range srcs {
			if cs, ok := src.(*sources.Cluster); ok {
				cs.ReadExceptions(opts.ExceptionNamespace)
			}
		}
	}
	return srcs
}
