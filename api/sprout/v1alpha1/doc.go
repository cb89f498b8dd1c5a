// Package v1alpha1 holds Sprout's own API, group sprout.dev: the
// PolicyInventory, the in-cluster record Sprout keeps for every policy it
// runs, whatever the policy's source; and the vocabulary Sprout writes on
// the objects it generates (labels, annotations, its field manager), which
// users select by and every package that reads those objects shares.
//
// +kubebuilder:object:generate=true
// +groupName=sprout.dev
package v1alpha1
