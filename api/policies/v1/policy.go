package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Policy is what both policy kinds share: their metadata and spec.
//
// +kubebuilder:object:generate=false
type Policy interface {
	metav1.Object
	// PolicySpec returns the policy's spec.
	PolicySpec() *GeneratingPolicySpec
	// IsNamespaced reports whether the policy is confined to its namespace.
	IsNamespaced() bool
	// PolicyStatus returns the policy's status.
	PolicyStatus() *GeneratingPolicyStatus
}

// PolicySpec returns the policy's spec.
func (p *GeneratingPolicy) PolicySpec() *GeneratingPolicySpec { return &p.Spec }

// IsNamespaced is false: a GeneratingPolicy is cluster-scoped.
func (p *GeneratingPolicy) IsNamespaced() bool { return false }

// PolicyStatus returns the policy's status.
func (p *GeneratingPolicy) PolicyStatus() *GeneratingPolicyStatus { return &p.Status }

// PolicyStatus returns the policy's status.
func (p *NamespacedGeneratingPolicy) PolicyStatus() *GeneratingPolicyStatus { return &p.Status }

// PolicySpec returns the policy's spec.
func (p *NamespacedGeneratingPolicy) PolicySpec() *GeneratingPolicySpec { return &p.Spec }

// IsNamespaced is true: the policy is confined to its namespace.
func (p *NamespacedGeneratingPolicy) IsNamespaced() bool { return true }

// GenerateExisting reports whether triggers that predate the policy are admitted.
func (s *GeneratingPolicySpec) GenerateExisting() bool {
	return s.EvaluationConfiguration != nil && s.EvaluationConfiguration.GenerateExisting.On()
}

// AdmissionEnabled reports whether the policy's events admit triggers:
// Kyverno's default, true. Off, as in Kyverno, only generateExisting
// generates, for the triggers that existed before the policy.
func (s *GeneratingPolicySpec) AdmissionEnabled() bool {
	e := s.EvaluationConfiguration
	return e == nil || e.Admission == nil || e.Admission.Enabled == nil || *e.Admission.Enabled
}

// Synchronize reports whether downstream objects follow the policy.
func (s *GeneratingPolicySpec) Synchronize() bool {
	return s.EvaluationConfiguration != nil && s.EvaluationConfiguration.Synchronize.On()
}

// SkipBackgroundRequests reports whether what generating policies
// generated is left out of the policy's triggers: Kyverno's default, true.
func (s *GeneratingPolicySpec) SkipBackgroundRequests() bool {
	return s.EvaluationConfiguration == nil || s.EvaluationConfiguration.SkipBackgroundRequests == nil ||
		bool(*s.EvaluationConfiguration.SkipBackgroundRequests)
}

// OrphanDownstreamOnPolicyDelete reports whether downstream objects outlive the policy.
func (s *GeneratingPolicySpec) OrphanDownstreamOnPolicyDelete() bool {
	return s.EvaluationConfiguration != nil && s.EvaluationConfiguration.OrphanDownstreamOnPolicyDelete.On()
}

// On reports whether the toggle is present and enabled.
func (t *Toggle) On() bool { return t != nil && t.Enabled != nil && *t.Enabled }
