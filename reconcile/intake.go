package reconcile

import (
	"context"
	"sync"

	"k8s.io/client-go/informers"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/evaluate"
	"github.com/sprout-gitops/sprout/reconcile/kinds"
	"github.com/sprout-gitops/sprout/reconcile/ledger"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/queue"
	"github.com/sprout-gitops/sprout/reconcile/report"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// intake is where the informers' events enter the core. It replays each
// trigger event as the admission event a webhook would have seen, admits
// triggers and keeps tombstones in the states of the policies the event
// concerns, notes what changed in the queue, and starts and stops the
// informers as the policies need them (informers.go, pushdown.go,
// deps.go, downstreams.go). It never syncs: it queues. It reads the
// running policies through policies, under the lock that guards them, and
// holds nothing of the Controller.
type intake struct {
	// policies runs f with the running policies under their lock, held
	// exclusively when exclusive.
	policies func(exclusive bool, f func(map[policy.Key]*policy.Compiled))
	states   *states
	queue    *queue.Queue
	reads    *watches.ReadIndex[policy.Key]

	kinds     *kinds.Kinds
	triggers  *watches.Triggers
	generated *watches.Generated
	// informers start the Namespace cache, which namespaced triggers need;
	// namespacesListed wakes, once, the policies that waited for it.
	informers        informers.SharedInformerFactory
	namespacesListed sync.Once
	rights           *access.Rights
	created          *cluster.CreatedVersions

	// eval matches triggers, tell hears of triggers gone, and ledger
	// confirms objects first cached: set once they are made, before any
	// informer runs.
	eval   *evaluate.Evaluator
	tell   *report.Teller
	ledger *ledger.Ledger
	// ctx is Run's, for the informers started later; set by start.
	ctx context.Context
}
