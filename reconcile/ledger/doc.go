// Package ledger owns what Sprout has recorded and generated for each
// policy, and the PolicyInventory records that keep it across restarts:
//
//   - the records (records.go): read from their cache, the state a policy
//     resumes from, what a sync saves in one and in its status, and the
//     records of policies a source no longer holds;
//   - each policy's Entry: the resources it has written to, the triggers
//     events admitted that its settings do not, what a policy that does
//     not synchronize has generated (generated.go), the objects a
//     synchronizing one claims (ownership.go) and those it wrote while
//     Sprout runs (selftrigger.go);
//   - the objects a policy owns, found by their labels in the generated
//     objects' caches of the resources it wrote to (Track starts and waits
//     for those), or listed live for a deleted policy's last sync; the
//     rebuild of a lost record's admissions from them (rebuild.go);
//   - the confirmation of objects first cached (confirm.go);
//   - which source's copy of a policy holds its name (names.go).
//
// The ledger decides nothing about a sync and writes no generated object:
// the core asks it, and writes the records through inventory.Records. What
// it needs of the core (a policy's Entry, whether it runs, queueing it) it
// asks through Core; it sends no Event and knows no policy's status.
// Entries live in the core's per-policy state, one per running policy,
// dropped with it.
package ledger
