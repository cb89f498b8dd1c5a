package reconcile

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/sync/semaphore"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/internal/gopool"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/evaluate"
	"github.com/sprout-gitops/sprout/reconcile/ledger"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/queue"
	"github.com/sprout-gitops/sprout/reconcile/report"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// syncer is the sync pipeline: it syncs one policy at a time (sync.go),
// with the parts it was made with. What it needs of the loop around it,
// of the access checks and of the watches, it asks through the small
// interfaces below: it never holds the Controller.
type syncer struct {
	loop   syncLoop
	checks syncAccess
	cache  syncReads
	// matcher lists the admitted, matching triggers (triggers.go).
	matcher *triggerMatcher
	log     *slog.Logger
	// dryRun: the syncs only plan (Options.DryRun).
	dryRun bool
	// blastRadius is the threshold of policies without their own
	// (Options.BlastRadius).
	blastRadius string

	eval    *evaluate.Evaluator
	ledger  *ledger.Ledger
	tell    *report.Teller
	metrics *report.Metrics
	rbac    *access.RBAC
	// writers are the writers of the accounts policies act as; created
	// pairs the versions their creates made with the downstream events.
	writers *access.Writers[writer]
	created *cluster.CreatedVersions
	reads   *watches.ReadIndex[policy.Key]
	states  *states
	// live serves the applies' lookups from the downstream caches.
	live inventory.Live
	// reporter writes records, status, Events and metrics, or, dry, keeps
	// the plan in planned.
	reporter reporter
	planned  plans
	// applies run the applies of a sync's parts but its last one, which
	// runs on the sync's goroutine (generate.go).
	applies *gopool.Pool
	// inFlight is the budget of triggers the full syncs' parts hold
	// evaluated, inFlightSize in all (generate.go).
	inFlight     *semaphore.Weighted
	inFlightSize int64
}

// syncLoop is what the pipeline asks of the loop: the policies it runs,
// its queue, and the syncs under way.
type syncLoop interface {
	// policy returns the compiled policy key runs, nil if none, and what
	// is kept of it once deleted, until its last sync (zero if it is not).
	policy(key policy.Key) (*policy.Compiled, retired)
	// replace makes next the running policy of key, if was still is.
	replace(key policy.Key, was, next *policy.Compiled)
	// retire forgets a deleted policy once its last sync is done.
	retire(key policy.Key)
	// queue queues the policy; takeChanges takes what events marked
	// changed of it since its last sync (nil: nothing).
	queue(key policy.Key)
	takeChanges(key policy.Key) *queue.Changes
	// takeArrived takes, for a sync under way, the triggers marked changed
	// since it began that in does not report, if at most limit
	// (queue.TakeTriggers); arrivals waits for the policy's next mark.
	takeArrived(key policy.Key, in func(types.UID) bool, limit int) *queue.Changes
	arrivals(key policy.Key) (<-chan struct{}, func())
	// beginSync returns the context of a sync of cp's policy, cancelled
	// when the policy is deleted, and the function that ends it.
	beginSync(ctx context.Context, key policy.Key, cp *policy.Compiled) (context.Context, func())
}

// syncAccess is what the pipeline asks of the access checks.
type syncAccess interface {
	actingAs(ctx context.Context, p apiv1.Policy) (*access.Account, error)
	verdict(ctx context.Context, key policy.Key, cp *policy.Compiled) *grantVerdict
	resolveRules(p apiv1.Policy) (triggers, refused []schema.GroupVersionResource, _ error)
	maxObjects(cp *policy.Compiled) (int, error)
	refuse(ctx context.Context, p apiv1.Policy, desired []*unstructured.Unstructured, kinds []schema.GroupVersionKind, v *access.Verdicts, failed sets.Set[string]) ([]*unstructured.Unstructured, []schema.GroupVersionKind, []error, error)
	pruneRefused(ctx context.Context, w writer, key policy.Key, v *access.Verdicts) (inventory.ChangeSet, error)
	// waitsForPermission reports whether a policy whose rules failed to
	// resolve with err waits only for an RBAC change, which queues it.
	waitsForPermission(err error) bool
}

// syncReads is what the pipeline asks of the watches of what evaluations
// read and of the generated objects.
type syncReads interface {
	// readerFor is the reader of the evaluations of run's sync;
	// endReads ends what the sync began in the read index.
	readerFor(run *syncRun, as *access.Account) *evaluate.Reader
	endReads(run *syncRun, ok bool, dirty []types.UID, evaluated []watches.TriggerReads)
	// resourcesOf maps the kinds of objs to their resources.
	resourcesOf(objs []*unstructured.Unstructured, kinds []schema.GroupVersionKind, seen map[schema.GroupVersionKind]error) (sets.Set[schema.GroupVersionResource], error)
	// downstreamEpoch counts the changes of the policy's objects.
	downstreamEpoch(key policy.Key) uint64
}

// newSyncer makes c's sync pipeline, once its parts are made.
func newSyncer(c *Controller, writers *access.Writers[writer]) *syncer {
	s := &syncer{loop: syncerCore{c}, checks: syncChecks{c}, cache: c.intake, log: c.log, dryRun: c.opts.DryRun,
		blastRadius: c.opts.BlastRadius, eval: c.eval, ledger: c.ledger, tell: c.tell, metrics: c.metrics, rbac: c.rights.RBAC(),
		writers: writers, created: c.created, reads: c.reads, states: c.states, live: c.intake.live(),
		applies:  gopool.NewIdle((c.opts.Workers+1)*(maxApplying+maxJoined), time.Minute),
		inFlight: semaphore.NewWeighted(int64(c.opts.TriggersInFlight)), inFlightSize: int64(c.opts.TriggersInFlight)}
	s.matcher = &triggerMatcher{loop: s.loop, checks: s.checks, watch: c.intake, informers: c.intake.triggers,
		eval: c.eval, ledger: c.ledger, tell: c.tell, states: c.states, log: c.log, dryRun: c.opts.DryRun,
		maxChain: c.opts.MaxChain, chains: &chainReports{}}
	s.reporter = liveReporter{s}
	if s.dryRun {
		s.reporter = planReporter{&s.planned}
	}
	return s
}

// syncerCore is what the pipeline asks of the controller's loop.
type syncerCore struct{ c *Controller }

var _ syncLoop = syncerCore{}

func (l syncerCore) policy(key policy.Key) (*policy.Compiled, retired) {
	l.c.mu.RLock()
	defer l.c.mu.RUnlock()
	return l.c.policies[key], l.c.deleted[key]
}

func (l syncerCore) replace(key policy.Key, was, next *policy.Compiled) {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if l.c.policies[key] == was {
		l.c.policies[key] = next
	}
}

func (l syncerCore) retire(key policy.Key) {
	l.c.mu.Lock()
	delete(l.c.deleted, key)
	l.c.mu.Unlock()
	l.c.forgetPolicy(key)
}

func (l syncerCore) queue(key policy.Key) { l.c.queue.Add(key) }

func (l syncerCore) takeChanges(key policy.Key) *queue.Changes { return l.c.queue.Take(key) }

func (l syncerCore) takeArrived(key policy.Key, in func(types.UID) bool, limit int) *queue.Changes {
	return l.c.queue.TakeTriggers(key, in, limit)
}

func (l syncerCore) arrivals(key policy.Key) (<-chan struct{}, func()) {
	return l.c.queue.Arrivals(key)
}
