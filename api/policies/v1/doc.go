// Package v1 holds the Go types of the policies.kyverno.io GeneratingPolicy,
// NamespacedGeneratingPolicy and PolicyException kinds, as Sprout reads them.
//
// Kyverno serves these kinds at v1, v1beta1 and v1alpha1 with one spec shape, so
// Sprout keeps one set of Go types and registers it under every version
// (see register.go). Match resources, match conditions and variables reuse the
// admissionregistration/v1 types, exactly as Kyverno does, so a policy written
// for Kyverno decodes unchanged.
//
// The package owns the shape of a policy and an exception, and a policy's
// decoding from YAML; it does not
// compile CEL (celenv) or decide what a policy generates (reconcile).
//
// +kubebuilder:object:generate=true
// +groupName=policies.kyverno.io
package v1
