package reconcile

import (
	"context"
	"sync"
	"time"

	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// A sync under way when its policy is deleted stops writing: its context
// is cancelled, so that no part of its triggers is applied after the one
// under way (Applier.Apply starts no object once its context ends), and
// the policy's last sync, queued by the deletion, prunes what it wrote.

// stopping reports whether Sprout is stopping (outer is the controller's
// context): a sync it interrupted reports nothing, for a request it
// cancelled is no failure of the policy's, and the next start syncs again.
func stopping(outer context.Context) bool { return outer.Err() != nil }

// syncs holds the cancel functions of the syncs under way, by policy.
type syncs struct {
	mu     sync.Mutex
	cancel map[policy.Key]context.CancelFunc
	// idle is closed when the last sync under way ends.
	idle chan struct{}
}

// reportsYield is the longest a report write waits for the syncs under
// way to end: a controller that is never idle still writes its reports.
const reportsYield = 5 * time.Second

// quiet returns once no sync is under way, after longest at most, or when
// ctx ends. PolicyReports are written between syncs: a cold generation's
// creates do not share the API server with them.
func (s *syncs) quiet(ctx context.Context, longest time.Duration) {
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
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

// started notes a sync of key under way, cancelled by cancel.
func (s *syncs) started(key policy.Key, cancel context.CancelFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		s.cancel = map[policy.Key]context.CancelFunc{}
	}
	if len(s.cancel) == 0 {
		s.idle = make(chan struct{})
	}
	s.cancel[key] = cancel
}

// ended notes the end of the sync of key.
func (s *syncs) ended(key policy.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cancel[key]; !ok {
		return
	}
	delete(s.cancel, key)
	if len(s.cancel) == 0 {
		close(s.idle)
		s.idle = nil
	}
}

// beginSync returns the context of a sync of cp's policy, cancelled when
// the policy is deleted, and the function that ends it.
func (l syncerCore) beginSync(ctx context.Context, key policy.Key, cp *policy.Compiled) (context.Context, func()) {
	c := l.c
	ctx, cancel := context.WithCancel(ctx)
	c.syncs.started(key, cancel)
	if !l.running(key, cp) {
		cancel() // deleted between the read of the policy and now
	}
	return ctx, func() {
		c.syncs.ended(key)
		cancel()
	}
}

// running reports whether cp's policy still runs, and not another policy
// since created under its name.
func (l syncerCore) running(key policy.Key, cp *policy.Compiled) bool {
	cur, _ := l.policy(key)
	return cur != nil && cur.Policy.GetUID() == cp.Policy.GetUID()
}

// stopSync cancels the sync of a policy under way, if any.
func (c *Controller) stopSync(key policy.Key) {
	c.syncs.mu.Lock()
	defer c.syncs.mu.Unlock()
	if cancel := c.syncs.cancel[key]; cancel != nil {
		cancel()
	}
}
