// Package reconcile owns Sprout's control loop. It receives the policies
// of every source, compiled by their source (sources.Handler), settles
// name conflicts between sources, resolves each policy's trigger resources,
// watches them, the Namespaces, the resources expressions read and the
// objects policies generated, replays watch events as the admission events
// a webhook would have seen, and syncs each policy. It is the core over
// parts that own their state and never import it: access (accounts,
// the resolution of rules to the resources a policy may watch, access
// reviews and the permission verdict, the RBAC watch, the binding guard
// and what it refuses), watches (the
// informers, which hand their events to the core, and the index of what
// evaluations read), kinds (discovery), evaluate (the evaluation of a
// policy for a trigger against the caches, the reader that records what
// it read, the matcher, the PolicyExceptions), report (conditions, the
// status writes and their workers, Events, the hand-off to the
// PolicyReports, metrics, PolicySources) and ledger (the PolicyInventory
// records, what each policy wrote to, admitted, generated and claims, and
// which source holds each policy name). The core keeps:
//
//   - the loop (loop.go): the work queue of policy keys (queue), the
//     workers, the resync schedule, and the start and stop of the
//     informers and sources;
//   - the intake (intake.go): where the informers' events enter, replayed
//     as admission events; it admits triggers, keeps tombstones and queues
//     the policies an event concerns, and starts and stops informers as
//     the policies need them;
//   - each policy's lifecycle: its state between its syncs (state), one
//     value per policy, is entered with it and dropped in one place when
//     it leaves (Controller.forgetPolicy);
//   - the sync pipeline (pipeline.go, sync.go): a type of its own, made
//     once, that syncs one policy at a time with one pipeline of phases
//     for a full and an incremental sync alike (runPhases): snapshot the
//     compiled policy, match its admitted triggers (triggers.go), evaluate
//     and apply them a part at a time (generate.go), prune (fullsync.go,
//     incremental.go), record, report; a deleted policy's last sync is
//     finalize.go. It holds the parts it uses, not the Controller, and
//     asks the loop, the access checks and the watches through small
//     interfaces it declares;
//   - the reporter (reporter.go): where a sync's outcome goes, the policy's
//     record, then its status and Events, which a report.Teller writes.
//     A dry run (Options.DryRun, Plan) has a reporter that keeps the plan
//     and writes nothing.
//
// The loop is level-triggered. Informer events only do three things:
// remember that an event admitted a trigger, note which trigger changed,
// and queue the key of every policy that may care. A sync never looks at
// the event that queued it: it re-reads the policy and the triggers from
// the informer caches. When only triggers changed since its last sync, it
// recomputes the part of the desired set they contribute (incremental.go);
// otherwise it recomputes the whole set. A burst of events for one policy
// coalesces into one sync, and a full sync repairs whatever an event
// missed.
//
// reconcile compiles no CEL and writes no generated object: sources
// compile, celenv evaluates, cluster decodes the watches and is the form
// every cache holds objects in, and inventory writes the generated objects
// and the PolicyInventory records, on reconcile's instructions. What reconcile
// writes itself is what it reports: the policies' status, the
// PolicySources' status and Events. docs/design.md follows a policy
// through a sync.
package reconcile
