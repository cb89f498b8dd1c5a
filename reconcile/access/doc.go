// Package access owns what Sprout knows of rights: which account a policy
// acts as (Accounts), the API server's answers to access reviews, kept
// until RBAC changes (Reviews), the clients that impersonate each account
// (Writers), the watch on roles and bindings that tells when those answers
// are stale (RBAC), and the judgement of the roles that generated bindings
// refer to (Guard).
//
// It knows nothing of syncs or of which policies exist: it answers
// questions, and tells whoever runs it what changed (an RBAC change, a
// role's change) through the functions it is given. Every answer comes
// from the API server, through a review or a cache of RBAC objects; the
// only judgement of its own is the Guard's, of what a role grants.
package access
