// Package report owns how the outcome of a sync is told: the Ready,
// RBACPermissionsGranted and kstatus conditions and the status a policy's
// outcome gives it (Kyverno's conditionStatus beside Sprout's own fields),
// the Events that are sent only when client-go would send them, and the
// Prometheus series.
//
// It computes what to write and counts; it does not decide when a sync
// runs, and it reads nothing from the cluster: whoever writes a status
// gives it the status the cache holds and sends the patch it returns.
package report
