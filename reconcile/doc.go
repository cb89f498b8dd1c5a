// Package reconcile owns Sprout's control loop: it receives the policies of
// every source (sources.Handler), compiles each as it arrives, watches
// their trigger kinds, the Namespaces, the resources their expressions read
// and the objects they generated, replays watch events as the admission
// events a webhook would have seen, queues the policies those events
// concern and runs the per-policy sync.
//
// The loop is level-triggered. Informer events only do two things: remember
// that an event admitted a trigger, and queue the key of every policy that
// may care. A sync never looks at the event that queued it: it re-reads the
// policy and every trigger from the informer caches and recomputes the
// policy's whole desired set, so a burst of events for one policy coalesces
// into one sync, and a re-queue repairs whatever an event missed.
//
// celenv evaluates; inventory writes the generated objects and the
// PolicyInventory records, on reconcile's instructions. What reconcile
// writes itself is what it reports: the policies' status, the
// PolicySources' status and Events. docs/design.md follows a policy
// through a sync.
package reconcile
