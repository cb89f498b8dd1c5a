// Package sources owns where policies come from and hands them to reconcile
// as a stream of changes. The cluster source watches the policy CRDs; Git and
// folder sources follow.
//
// A source never compiles or evaluates a policy: it decodes it, names where it
// came from (source and revision) and says when it changed or went away.
package sources
