package reconcile

import "github.com/sprout-gitops/sprout/reconcile/report"

// Reasons of the Ready condition (package report says when each is given).
const (
	ReasonReconciled            = report.ReasonReconciled
	ReasonCompileFailed         = report.ReasonCompileFailed
	ReasonMatchFailed           = report.ReasonMatchFailed
	ReasonEvaluationFailed      = report.ReasonEvaluationFailed
	ReasonApplyFailed           = report.ReasonApplyFailed
	ReasonNotOwned              = report.ReasonNotOwned
	ReasonPruneFailed           = report.ReasonPruneFailed
	ReasonUnobservableTrigger   = report.ReasonUnobservableTrigger
	ReasonInvalidServiceAccount = report.ReasonInvalidServiceAccount
)

// Conditions a policy's status holds (package report).
const (
	ConditionReady                  = report.ConditionReady
	ConditionReconciling            = report.ConditionReconciling
	ConditionStalled                = report.ConditionStalled
	ConditionRBACPermissionsGranted = report.ConditionRBACPermissionsGranted
	// MessagePermissionsGranted is the message of a true
	// RBACPermissionsGranted, Kyverno's.
	MessagePermissionsGranted  = report.MessagePermissionsGranted
	ReasonProgressing          = report.ReasonProgressing
	ReasonProgressingWithRetry = report.ReasonProgressingWithRetry
)

// Reasons of the Events a sync emits besides the Ready reasons.
const (
	ReasonGenerated = report.ReasonGenerated
	ReasonPruned    = report.ReasonPruned
)

// Reasons of a PolicySource's Ready condition and of its Events (package
// report writes them).
const (
	ReasonRevisionTaken    = report.ReasonRevisionTaken
	ReasonRevisionRejected = report.ReasonRevisionRejected
	ReasonCheckFailed      = report.ReasonCheckFailed
	ReasonChecking         = report.ReasonChecking
	ReasonWatching         = report.ReasonWatching
	ReasonPolicyConflict   = report.ReasonPolicyConflict
)

// eventObjects is how many objects an Event names before it says "and N more".
const eventObjects = report.EventObjects
