// Package reconcile owns Sprout's control loop: informers on policies and on
// their trigger kinds, the replay of watch events as admission events, the
// work queue and the per-policy sync.
//
// The loop is level-triggered. Informer events only do two things: remember
// that an event admitted a trigger, and queue the key of every policy that
// may care. A sync never looks at the event that queued it: it re-reads the
// policy and every trigger from the informer caches and recomputes the
// policy's whole desired set (DESIGN §3), so a burst of events for one policy
// coalesces into one sync, and a re-queue repairs whatever an event missed.
//
// reconcile reads; celenv evaluates; inventory writes.
package reconcile
