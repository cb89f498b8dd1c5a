// Package sources owns where policies come from and hands them to reconcile
// as a stream of changes. The cluster source watches the policy CRDs; Git and
// folder sources follow.
//
// A source never compiles or evaluates a policy: it decodes it, names where it
// came from (source and revision) and says when it changed or went away.
//
// Git credentials are an AuthFunc the source calls at every check (FileAuth,
// SecretAuth), never a value fixed at start-up, so rotated credentials apply
// without a restart and a failed read is reported like any failed fetch. An
// SSH remote is reached only with known_hosts: no host key is ever accepted
// unchecked.
package sources
