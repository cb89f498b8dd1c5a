package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of the policy kinds, shared with Kyverno.
const Group = "policies.kyverno.io"

// Version is the version Sprout reads and writes. Every served version has the
// same schema (the CRDs convert with strategy None), so any of them decodes
// into these types.
const Version = "v1"

// GroupVersion is Group at Version.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// ServedVersions are the versions the CRDs serve, storage version first.
// NamespacedGeneratingPolicy is not served at v1alpha1, as in Kyverno.
var ServedVersions = []string{"v1beta1", "v1", "v1alpha1"}

// Resources of the two kinds.
var (
	GeneratingPolicies           = GroupVersion.WithResource("generatingpolicies")
	NamespacedGeneratingPolicies = GroupVersion.WithResource("namespacedgeneratingpolicies")
)

// AddToScheme registers the policy types under every served version.
func AddToScheme(s *runtime.Scheme) error {
	for _, v := range ServedVersions {
		gv := schema.GroupVersion{Group: Group, Version: v}
		s.AddKnownTypes(gv, &GeneratingPolicy{}, &GeneratingPolicyList{})
		if v != "v1alpha1" {
			s.AddKnownTypes(gv, &NamespacedGeneratingPolicy{}, &NamespacedGeneratingPolicyList{})
		}
	}
	return nil
}
