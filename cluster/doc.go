// Package cluster owns what Sprout knows about the objects in the
// cluster: how its informers watch them (the watch decoding, JSON and
// protobuf), the one form its caches keep every object in (Object), and
// the pairing of the versions Sprout's creates made with the watch events
// that bring them, so that the caches keep those versions released; and
// the proof Sprout signs into what it generates, verified as an object is
// decoded (ProofKey); and the objects of an informer's first list a
// page at a time, before the list is complete (Listing).
//
// It is a package of its own, apart from reconcile, which runs the
// informers, and inventory, which writes: both read these objects, and
// the watch is the hot path of a cold start (docs/performance.md), where
// reading fast means reading bytes. The byte-level readers stay in here,
// behind the same interfaces a plain decoder has (watch.Decoder, and
// Object's accessors and Decode). The writer is not on this path: an
// Applier only reports its creates (CreatedVersions.Created), whoever it
// writes as.
//
// It never writes to the cluster and never decides what a policy wants.
package cluster
