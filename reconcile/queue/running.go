package queue

import (
	"context"
	"sync"
	"time"

	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// Running holds the syncs under way, by policy, with the functions that
// cancel them: a policy deleted while its sync runs stops it (Stop), and
// the PolicyReports wait for a gap between syncs (Quiet). The zero value
// holds none.
type Running struct {
	mu     sync.Mutex
	cancel map[policy.Key]context.CancelFunc
	// idle is closed when the last sync under way ends; before the first
	// sync, Quiet makes one that the first syncs' end closes.
	idle chan struct{}
}

// Started notes a sync of key under way, cancelled by cancel.
func (r *Running) Started(key policy.Key, cancel context.CancelFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel == nil {
		r.cancel = map[policy.Key]context.CancelFunc{}
	}
	if r.idle == nil {
		r.idle = make(chan struct{})
	}
	r.cancel[key] = cancel
}

// Ended notes the end of the sync of key.
func (r *Running) Ended(key policy.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cancel[key]; !ok {
		return
	}
	delete(r.cancel, key)
	if len(r.cancel) == 0 {
		close(r.idle)
		r.idle = nil
	}
}

// Stop cancels the sync of key under way, if any.
func (r *Running) Stop(key policy.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cancel := r.cancel[key]; cancel != nil {
		cancel()
	}
}

// Len counts the syncs under way.
func (r *Running) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cancel)
}

// Quiet returns once no sync is under way, after longest at most, or when
// ctx ends; before the first sync, once the first ones end. PolicyReports
// are read and written between syncs: a cold generation's creates and a
// start's lists do not share the API server with them.
func (r *Running) Quiet(ctx context.Context, longest time.Duration) {
	r.mu.Lock()
	if r.cancel == nil && r.idle == nil {
		r.idle = make(chan struct{})
	}
	idle := r.idle
	r.mu.Unlock()
	if idle == nil {
		return
	}
	t := time.NewTimer(longest)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
}
