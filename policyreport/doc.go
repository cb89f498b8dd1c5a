// Package policyreport owns the PolicyReports Sprout writes for its generating
// policies, in the form Kyverno 1.19 gives them: one report per trigger
// object (wgpolicyk8s.io/v1alpha2 PolicyReport in the trigger's namespace,
// ClusterPolicyReport for a cluster-scoped trigger), named by the trigger's
// UID, owned by the trigger so that the garbage collector removes it with
// the trigger, and holding one result per policy.
//
// The reconciler hands results over as its evaluations give them (Writer.Set)
// and goes on: a Writer keeps the latest result of each policy for each
// trigger and writes the reports whose results changed from a queue of its
// own, coalescing per trigger and bounded in rate, so that reports never
// slow generation.
package policyreport
