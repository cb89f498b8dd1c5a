package ledger

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// Ledger keeps the PolicyInventory records, the objects first seen that
// wait for a look, and the sources' claims on policy names. Its Entries
// are kept by the core, one per running policy.
type Ledger struct {
	core  Core
	cache Cache
	// dyn reads the objects live and writes the records.
	dyn dynamic.Interface
	// proof verifies the proofs of the objects read live.
	proof *cluster.ProofKey
	log   *slog.Logger
	// records reads PolicyInventory records from their cache and writes
	// them; set by Start.
	records *inventory.Records
	// confirms are the objects of policies first cached at a version not
	// known then as created by Sprout, to look at again (confirm.go).
	confirms firstSeen
	names    Names
}

// Core is what the ledger asks of the reconcile core.
type Core interface {
	// Entry returns the entry of a policy; nil when it does not run.
	Entry(key policy.Key) *Entry
	// Running reports whether the policy runs.
	Running(key policy.Key) bool
	// Queue queues the policy for a full sync.
	Queue(key policy.Key)
	// QueueGenerated queues the policy that generated obj, after d if
	// d > 0: for the trigger obj was generated for, or whole.
	QueueGenerated(key policy.Key, obj any, d time.Duration)
}

// Cache is the generated objects' informers (watches.Generated): those of
// the resources a policy writes to are started, waited for, and read by
// owner and by trigger.
type Cache interface {
	Ensure(gvrs sets.Set[schema.GroupVersionResource])
	WaitSynced(ctx context.Context, gvrs sets.Set[schema.GroupVersionResource], timeout time.Duration) bool
	ByIndex(gvr schema.GroupVersionResource, index, value string) ([]any, error)
}

// New returns a Ledger that asks core, reads the generated objects from
// cache, or live through dyn (their proofs verified with proof), and
// writes the records through dyn; its records are read once Start has
// started their cache.
func New(core Core, cache Cache, dyn dynamic.Interface, proof *cluster.ProofKey, log *slog.Logger) *Ledger {
	return &Ledger{core: core, cache: cache, dyn: dyn, proof: proof, log: log}
}

// Names are the sources' claims on policy names.
func (l *Ledger) Names() *Names { return &l.names }

// Track records that the policy writes to gvrs and makes sure each is
// watched. It returns how many resources the policy has written to, and
// whether each is in the cache, before which what it owns cannot be known.
func (l *Ledger) Track(ctx context.Context, key policy.Key, gvrs sets.Set[schema.GroupVersionResource]) (int, bool) {
	n, synced := l.Watch(key, gvrs)
	return n, synced(ctx)
}

// Watch is Track without the wait: synced waits for the caches, and
// answers at once after its first answer. A sync writes its record while
// they list; only its writes must wait for them.
//
// An informer just started lists only Sprout's objects of its resource,
// which takes milliseconds: synced waits for it up to syncWait rather
// than the sync going back to the queue and coming back in 100 ms.
func (l *Ledger) Watch(key policy.Key, gvrs sets.Set[schema.GroupVersionResource]) (n int, synced func(context.Context) bool) {
	all := l.core.Entry(key).WritesTo(gvrs)
	l.cache.Ensure(all)
	var asked, ready bool
	return len(all), func(ctx context.Context) bool {
		if !asked {
			asked, ready = true, l.cache.WaitSynced(ctx, all, syncWait)
		}
		return ready
	}
}

// syncWait bounds how long a sync waits for the informers of the
// resources it writes to list what exists.
const syncWait = 2 * time.Second
