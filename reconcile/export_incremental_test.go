package reconcile

// Idle reports whether no policy is queued or syncing and no status waits
// to be written.
func (c *Controller) Idle() bool {
	c.syncs.mu.Lock()
	syncing := len(c.syncs.cancel)
	c.syncs.mu.Unlock()
	c.reports.mu.Lock()
	reporting := len(c.reports.pending)
	c.reports.mu.Unlock()
	return syncing == 0 && reporting == 0 && c.queue.Len() == 0 && c.statusQueue.Len() == 0
}

// ResyncAll queues every policy for a full sync, as a scheduled resync
// does, without forgetting what was decided or settled.
func (c *Controller) ResyncAll() { c.requeueAll() }
