// Package v2beta1 holds the Go type of Kyverno's kyverno.io GlobalContextEntry,
// as Sprout reads it, and its validation.
//
// Kyverno serves the kind at v2, v2beta1 and v2alpha1 (deprecated) with one
// spec shape, and stores v2beta1: Sprout reads that version, which no API
// server warns about. Sprout does not own the CRD: it is Kyverno's, installed
// with Kyverno or from Kyverno's release (docs/policies.md). The package
// owns the entry's shape and what makes one invalid; the globalctx package
// serves the entries' data.
//
// +kubebuilder:object:generate=true
// +kubebuilder:skip
package v2beta1
