// Package watches owns Sprout's informers: on trigger resources and what
// expressions read (Triggers: one informer per resource, namespace and
// label selector), and label-selected ones on the objects Sprout generated
// (Generated, indexed by owning policy and by trigger). It starts and stops
// them as it is told, serves their caches, and hands every event to the
// handler it is given.
//
// It knows nothing of policies: which events admit a trigger, which
// policies an event queues and which informers are still needed are the
// decisions of whoever runs it.
package watches
