// Package evaluate owns the evaluation of a compiled policy for one
// trigger against the informer caches: the event the trigger is replayed
// as (a CREATE, the UPDATE a policy that reads oldObject saw last, or a
// tombstone's DELETE), the results kept while their inputs hold, and the
// labels that tie what it generates to its policy and trigger. Beside it:
//
//   - the Reader of one sync, which serves expressions' resource.Get and
//     resource.List from the caches as the policy's account may read
//     them, records the resources read and each evaluation's reads (a
//     watches.Tape), and serves the GlobalContextEntries (GlobalContext);
//   - the Matcher, the API server's own admission matching, which the
//     core and sprout render select triggers with;
//   - the sources' PolicyExceptions, and each policy's set of them
//     (PolicyExceptions, kept in the core's state of the policy): a new
//     set is a new pointer, which a kept evaluation compares.
//
// It compiles no CEL (celenv does), starts no informer, asks no access
// review and queues nothing itself: the core gives it the caches, the
// reviews and its queue as functions (Config, Sync). It writes nothing.
package evaluate
