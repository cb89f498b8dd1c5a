// Package policyreport owns the PolicyReports Sprout writes for its generating
// policies, in the form Kyverno 1.19 gives them: one report per trigger
// object (wgpolicyk8s.io/v1alpha2 PolicyReport in the trigger's namespace,
// ClusterPolicyReport for a cluster-scoped trigger; openreports.io/v1alpha1
// Report and ClusterReport with the OpenReports API), named by the trigger's
// UID, owned by the trigger so that the garbage collector removes it with
// the trigger, and holding one result per policy that matches the trigger.
//
// The reconciler hands results over as its evaluations give them (Writer.Set)
// and goes on: a Writer keeps the latest result of each policy for each
// trigger and writes the reports whose results changed from a queue of its
// own, coalescing per trigger, bounded in rate and held back while the
// controller generates (Options.Yield), so that reports never slow
// generation. It writes only the results it changed, over the report
// as the server holds it, so that writers of disjoint policies (shards)
// share a trigger's report.
package policyreport
