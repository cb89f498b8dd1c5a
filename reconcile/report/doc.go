// Package report owns how the outcome of a sync is told: the Ready,
// RBACPermissionsGranted and kstatus conditions and the status a policy's
// outcome gives it (Kyverno's conditionStatus beside Sprout's own fields),
// the Events that are sent only when client-go would send them, and the
// Prometheus series.
//
// A Teller writes them. It keeps the outcomes of syncs not yet written,
// coalesced per policy, and runs the status workers that write each to the
// policy's status (a patch only when the status differs from the newest
// the cache or its own last write holds) and, through the core, to its
// record's; it tells the policies' Events, hands the results of
// evaluations to the PolicyReports writer, and owns the PolicySources'
// writer (Sources). What was told of one policy is a Told, which the core
// keeps with the policy's state, so that it goes with the policy.
//
// It does not decide when a sync runs, and it never holds the core: the
// running policies, what was told of them and their records it asks of
// the core through functions (TellerCore).
package report
