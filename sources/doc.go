// Package sources owns where policies come from and hands them to reconcile
// as a stream of changes (Handler). The cluster source watches the policy
// CRDs; Git and folder sources poll; a Flux source watches a Flux source
// object and downloads its artifact when it moves.
//
// A source decodes each policy, compiles it (celenv.Compile) and hands it
// over with its Program, naming where it came from (source and revision);
// it says when a policy changed or went away. Nothing compiles a policy
// again after its source. The cluster source compiles each generation of a
// policy once, however often a status write delivers it again. Git, folder
// and Flux sources compile every policy of a revision (load.go) before they
// hand any over: a revision is taken whole or not at all, so a policy that
// does not compile rejects its revision, and the last good one keeps
// running. A source never evaluates a policy.
//
// Git credentials are an AuthFunc the source calls at every check (FileAuth,
// SecretAuth), never a value fixed at start-up, so rotated credentials apply
// without a restart and a failed read is reported like any failed fetch. An
// SSH remote is reached only with known_hosts: no host key is ever accepted
// unchecked.
package sources
