package v1

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kind names of the two policy kinds.
const (
	GeneratingPolicyKind           = "GeneratingPolicy"
	NamespacedGeneratingPolicyKind = "NamespacedGeneratingPolicy"
)

// GeneratingPolicy generates downstream objects for every trigger object that
// matches it. It is cluster-scoped and may write into any namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=generatingpolicies,scope=Cluster,shortName=gpol,categories=kyverno;sprout
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="TRIGGERS",type=integer,JSONPath=`.status.triggers`
// +kubebuilder:printcolumn:name="OBJECTS",type=integer,JSONPath=`.status.objects`
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type GeneratingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec GeneratingPolicySpec `json:"spec"`
	// Status is written by the controller that runs the policy.
	// +optional
	Status GeneratingPolicyStatus `json:"status,omitempty"`
}

// NamespacedGeneratingPolicy is a GeneratingPolicy confined to its own
// namespace: it can neither read nor write outside it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=namespacedgeneratingpolicies,scope=Namespaced,shortName=ngpol,categories=kyverno;sprout
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="TRIGGERS",type=integer,JSONPath=`.status.triggers`
// +kubebuilder:printcolumn:name="OBJECTS",type=integer,JSONPath=`.status.objects`
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type NamespacedGeneratingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec GeneratingPolicySpec `json:"spec"`
	// Status is written by the controller that runs the policy.
	// +optional
	Status GeneratingPolicyStatus `json:"status,omitempty"`
}

// GeneratingPolicyList is a list of GeneratingPolicy objects.
//
// +kubebuilder:object:root=true
type GeneratingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GeneratingPolicy `json:"items"`
}

// NamespacedGeneratingPolicyList is a list of NamespacedGeneratingPolicy objects.
//
// +kubebuilder:object:root=true
type NamespacedGeneratingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespacedGeneratingPolicy `json:"items"`
}

// GeneratingPolicySpec is the behaviour of a generating policy. The shape is
// Kyverno's, field for field.
type GeneratingPolicySpec struct {
	// MatchConstraints selects the trigger objects: resource rules, exclusions,
	// namespace and object selectors, as in a ValidatingAdmissionPolicy.
	// Operations decide which observed events admit a trigger.
	// +optional
	MatchConstraints *admissionregistrationv1.MatchResources `json:"matchConstraints,omitempty"`

	// MatchConditions are CEL expressions a trigger must all satisfy.
	// +listType=map
	// +listMapKey=name
	// +optional
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`

	// Variables are named CEL expressions available as variables.<name> to the
	// expressions after them and to generate[].
	// +listType=map
	// +listMapKey=name
	// +optional
	Variables []admissionregistrationv1.Variable `json:"variables,omitempty"`

	// EvaluationConfiguration switches generate-existing, synchronisation and
	// orphaning on policy delete.
	// +optional
	EvaluationConfiguration *EvaluationConfiguration `json:"evaluation,omitempty"`

	// WebhookConfiguration is accepted for compatibility with Kyverno and
	// ignored: Sprout has no webhook.
	// +optional
	WebhookConfiguration *WebhookConfiguration `json:"webhookConfiguration,omitempty"`

	// UseServerSideApply, as in Kyverno, applies a trigger's objects again
	// at each UPDATE of the trigger, with server-side apply, even without
	// synchronize: the policy's fields are put back, the fields other
	// managers own kept. Without it, a policy that does not synchronize
	// generates once. Sprout writes with server-side apply either way.
	// +optional
	UseServerSideApply bool `json:"useServerSideApply,omitempty"`

	// AuditAnnotations are evaluated for each trigger the policy matched,
	// after its generate entries, into the properties of its result in the
	// trigger's PolicyReport, as Kyverno does.
	// +optional
	AuditAnnotations []admissionregistrationv1.AuditAnnotation `json:"auditAnnotations,omitempty"`

	// Generation lists what the policy generates for each trigger.
	// +kubebuilder:validation:MinItems=1
	Generation []Generation `json:"generate"`
}

// EvaluationConfiguration holds the switches of a policy's evaluation. The
// defaults are Kyverno's, so a policy stored under either CRD set reads the
// same.
type EvaluationConfiguration struct {
	// Admission switches the generation for new triggers, on by default.
	// Sprout has no webhook: it replays the watches' events as admission
	// events. Off, no event admits a trigger, and only generateExisting
	// generates, for the triggers that existed before the policy.
	// +optional
	Admission *AdmissionConfiguration `json:"admission,omitempty"`

	// GenerateExisting generates for triggers that already existed when the
	// policy was activated. Defaults to false.
	// +optional
	GenerateExisting *Toggle `json:"generateExisting,omitempty"`

	// Synchronize keeps downstream objects equal to what the policy generates:
	// reverts edits, recreates deletions, prunes what is no longer generated.
	// Defaults to false.
	// +optional
	Synchronize *Toggle `json:"synchronize,omitempty"`

	// OrphanDownstreamOnPolicyDelete keeps downstream objects when the policy is
	// deleted. Defaults to false.
	// +optional
	OrphanDownstreamOnPolicyDelete *Toggle `json:"orphanDownstreamOnPolicyDelete,omitempty"`

	// SkipBackgroundRequests, true by default as in Kyverno, leaves what
	// generating policies generated out of the policy's triggers: Sprout
	// knows the objects whose origin it wrote. Sprout also reads the
	// {enabled: bool} object its CRDs once declared here.
	// +kubebuilder:default=true
	// +optional
	SkipBackgroundRequests *Flag `json:"skipBackgroundRequests,omitempty"`
}

// AdmissionConfiguration is Kyverno's admission switch, on by default.
type AdmissionConfiguration struct {
	// Enabled false leaves new triggers without generated objects.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// Toggle is an optional on/off switch, off by default.
type Toggle struct {
	// Enabled switches the feature on.
	// +kubebuilder:default=false
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// WebhookConfiguration is Kyverno's webhook tuning, accepted and ignored.
type WebhookConfiguration struct {
	// TimeoutSeconds is ignored by Sprout.
	// +optional
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// Generation is one generate entry: either a CEL expression that calls
// generator.Apply, or a YAML template.
//
// +kubebuilder:validation:XValidation:rule="(has(self.expression) && !has(self.template)) || (!has(self.expression) && has(self.template))",message="exactly one of expression or template must be set"
type Generation struct {
	// Name identifies the entry in status and errors.
	// +optional
	Name string `json:"name,omitempty"`

	// Expression is a CEL expression returning bool that generates objects
	// through generator.Apply.
	// +optional
	Expression string `json:"expression,omitempty"`

	// Template is a YAML document (or several) to generate, optionally with
	// (( expr )) CEL placeholders.
	// +optional
	Template *Template `json:"template,omitempty"`
}

// Interpolation says how a template's placeholders are treated.
// +kubebuilder:validation:Enum=none;cel
type Interpolation string

// Interpolation modes.
const (
	InterpolateNone Interpolation = "none"
	InterpolateCEL  Interpolation = "cel"
)

// Template is a generate entry written as YAML.
type Template struct {
	// Value is the YAML of one or more objects.
	// +kubebuilder:validation:MinLength=1
	Value string `json:"value"`

	// Interpolate is "cel" to evaluate (( expr )) placeholders, "none" to take
	// the YAML literally. Defaults to none.
	// +kubebuilder:default=none
	// +optional
	Interpolate Interpolation `json:"interpolate,omitempty"`
}

// GeneratingPolicyStatus is written by Sprout. ConditionStatus is Kyverno's
// shape, kept so Kyverno tooling reads it; the other fields are Sprout's.
type GeneratingPolicyStatus struct {
	// ConditionStatus is the status shape Kyverno writes.
	// +optional
	ConditionStatus ConditionStatus `json:"conditionStatus,omitempty"`

	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions hold Ready and the reason it is not.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Triggers counts the admitted, matching trigger objects.
	// +optional
	Triggers int `json:"triggers,omitempty"`

	// Objects counts the downstream objects the policy owns.
	// +optional
	Objects int `json:"objects,omitempty"`

	// FailedTriggers counts the triggers that failed at the last sync:
	// their match, their evaluation, or a refusal of what they generate.
	// Their objects are kept as they are until they evaluate cleanly.
	// +optional
	FailedTriggers int `json:"failedTriggers"`
}

// ConditionStatus is the status Kyverno writes on its policies.
type ConditionStatus struct {
	// Ready summarises the conditions.
	// +optional
	Ready *bool `json:"ready,omitempty"`

	// Conditions detail the policy's state.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Message is empty when the policy is ready.
	// +optional
	Message string `json:"message,omitempty"`
}
