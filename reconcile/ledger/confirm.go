package ledger

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// confirmAfter is how long after an object of a policy first shows up in
// a cache it is looked at again. By then the answer of the create that
// made it has come too, whichever of the two came first: a version Sprout
// created as desired is cached released (cluster.CreatedVersions), and the
// next sync of its trigger adopts it (inventory.Settled.Holds) with no
// sync of its own. Any other version (changed before the cache first
// showed it, an edit in a relist's gap with no update event, another
// writer's, or one a later sync of its policy looked for before it was
// cached, which cluster.CreatedVersions.Overlook keeps unreleased) syncs
// its policy for its trigger, which compares it in full and prunes it if
// it is no longer wanted. A version released already when such a sync
// looked, on its way from the watch to the cache, syncs its trigger as
// soon as the cache holds it (cluster.CreatedVersions.Cached).
// Queueing every created object for a sync instead made a cold generation
// of more triggers than a policy marks one by one (maxDirty) end with a
// second full sync of all of them.
const confirmAfter = time.Second

// firstSeen holds the objects first cached since the last look, which one
// timer looks at together.
type firstSeen struct {
	mu      sync.Mutex
	objects []firstSighting
	armed   bool
	// looks counts the looks taken, each at every object first seen
	// before it.
	looks atomic.Int64
}

type firstSighting struct {
	store cache.Store
	key   policy.Key
	obj   *cluster.Object
}

// ConfirmLater looks at obj, an object of the policy key that store has
// just cached, after confirmAfter.
func (l *Ledger) ConfirmLater(store cache.Store, key policy.Key, obj any) {
	o, ok := obj.(*cluster.Object)
	if !ok {
		l.core.QueueGenerated(key, obj, confirmAfter)
		return
	}
	l.confirms.mu.Lock()
	defer l.confirms.mu.Unlock()
	l.confirms.objects = append(l.confirms.objects, firstSighting{store: store, key: key, obj: o})
	if !l.confirms.armed {
		l.confirms.armed = true
		time.AfterFunc(confirmAfter, l.confirm)
	}
}

// confirm queues the policies of the objects first seen that are not a
// version Sprout created as desired and are still cached as first seen:
// one changed or deleted since had its own event, which queued its policy.
func (l *Ledger) confirm() {
	l.confirms.mu.Lock()
	seen := l.confirms.objects
	l.confirms.objects, l.confirms.armed = nil, false
	l.confirms.mu.Unlock()
	for _, s := range seen {
		cur, ok, err := s.store.Get(s.obj)
		o, _ := cur.(*cluster.Object)
		if err != nil || !ok || o == nil || o.GetResourceVersion() != s.obj.GetResourceVersion() {
			continue
		}
		if createdAsDesired(s.obj) || createdAsDesired(o) {
			continue // a relist may have cached the version again
		}
		l.core.QueueGenerated(s.key, s.obj, 0)
	}
	l.confirms.looks.Add(1)
}

// ConfirmationLooks counts the looks at objects first seen taken.
func (l *Ledger) ConfirmationLooks() int64 { return l.confirms.looks.Load() }

// createdAsDesired reports whether o is a version a create of Sprout's
// made as desired, which the cache keeps released.
func createdAsDesired(o *cluster.Object) bool {
	_, released := o.Released()
	return released
}
