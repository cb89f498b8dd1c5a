package ledger

import (
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// Ledger keeps the PolicyInventory records, the objects first seen that
// wait for a look, and the sources' claims on policy names. Its Entries
// are kept by the core, one per running policy.
type Ledger struct {
	core  Core
	cache Cache
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

// Cache serves the generated objects' informer caches, indexed by owner
// and by trigger (watches.Generated).
type Cache interface {
	ByIndex(gvr schema.GroupVersionResource, index, value string) ([]any, error)
}

// New returns a Ledger that asks core and reads the generated objects
// from cache; its records are read once Start has started their cache.
func New(core Core, cache Cache, log *slog.Logger) *Ledger {
	return &Ledger{core: core, cache: cache, log: log}
}

// Names are the sources' claims on policy names.
func (l *Ledger) Names() *Names { return &l.names }
