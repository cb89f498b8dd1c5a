// Package access owns what Sprout knows of rights, and answers for a
// policy what its rights allow (Rights): which account it acts as
// (Accounts), which resources its rules resolve to that it and Sprout may
// watch (Rights.Resolve), whether it holds every permission it needs, its
// RBACPermissionsGranted verdict (Rights.Check), and which of the objects
// it generates Sprout must not write (Rights.Refuse). Behind them: the API
// server's answers to access reviews, kept until RBAC changes (Reviews),
// the clients that impersonate each account (Writers), the watch on roles
// and bindings that tells when those answers are stale (RBAC), and the
// judgement of what generated bindings and ClusterRoles grant (Guard).
//
// It knows nothing of syncs or of which policies exist: it answers
// questions, and tells whoever runs it what changed (an RBAC change, a
// role's change) through the functions it is given; discovery and where
// each resource is watched are given too. Every answer comes from the API
// server, through discovery, a review or a cache of RBAC objects; the only
// judgement of its own is which objects grant rights (GrantsRights), and
// so need a named identity.
package access
