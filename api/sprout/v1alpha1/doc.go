// Package v1alpha1 holds Sprout's own API, group sprout.dev: the
// PolicyInventory, the in-cluster record Sprout keeps for every policy it
// runs, whatever the policy's source.
//
// +kubebuilder:object:generate=true
// +groupName=sprout.dev
package v1alpha1
