package access

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// AnnotationServiceAccount on a policy makes Sprout write its objects, and
// check its triggers and its resource.Get and resource.List reads, as that
// ServiceAccount: "name" (in the policy's namespace; a
// NamespacedGeneratingPolicy only) or "namespace/name". RBAC then bounds
// what the policy can generate, as Flux's serviceAccountName does for a
// Kustomization.
//
// Which accounts a policy may name is the operator's to bound, since
// naming a powerful account would hand its rights to whoever writes the
// policy: a NamespacedGeneratingPolicy only accounts of its own namespace,
// a GeneratingPolicy only accounts of Accounts.Namespaces.
const AnnotationServiceAccount = "sprout.dev/service-account"

// DefaultServiceAccount is the account a NamespacedGeneratingPolicy runs as,
// in its own namespace, unless it names one: a tenant's policy gets the
// rights its namespace grants that account, never Sprout's. Kubernetes
// makes "default" in every namespace, with no rights until they are bound.
const DefaultServiceAccount = "default"

// Account is a ServiceAccount a policy acts as.
type Account struct{ Namespace, Name string }

func (a Account) String() string { return a.Namespace + "/" + a.Name }

// User is the account's user name, as impersonation and reviews name it.
func (a Account) User() string {
	return "system:serviceaccount:" + a.Namespace + ":" + a.Name
}

// Groups are the groups the API server puts every ServiceAccount of the
// account's namespace in.
func (a Account) Groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + a.Namespace, "system:authenticated"}
}

// Accounts says which account a policy acts as.
type Accounts struct {
	// Default is the name of the account, in its own namespace, a
	// NamespacedGeneratingPolicy without AnnotationServiceAccount acts as;
	// empty means Sprout's own.
	Default string
	// Namespaces are those whose accounts a GeneratingPolicy may name.
	Namespaces []string
}

// Validate checks the accounts flags before anything connects: the default
// is a bare name (it lives in each policy's namespace), and the namespaces
// are namespace names.
func (a Accounts) Validate() error {
	if a.Default != "" && len(validation.IsDNS1123Subdomain(a.Default)) > 0 {
		return fmt.Errorf("--default-service-account: %q is not the name of a ServiceAccount (it names one in each NamespacedGeneratingPolicy's namespace)", a.Default)
	}
	for _, ns := range a.Namespaces {
		if len(validation.IsDNS1123Label(ns)) > 0 {
			return fmt.Errorf("--service-account-namespaces: %q is not a namespace name", ns)
		}
	}
	return nil
}

// For returns the account p acts as: its annotation; else, for a
// NamespacedGeneratingPolicy, Default in its namespace; else nil
// (Sprout's own). An error names the field that is wrong.
func (a Accounts) For(p apiv1.Policy) (*Account, error) {
	v, ok := p.GetAnnotations()[AnnotationServiceAccount]
	field := "metadata.annotations[" + AnnotationServiceAccount + "]"
	if !ok {
		if !p.IsNamespaced() || a.Default == "" {
			return nil, nil
		}
		v, field = a.Default, "--default-service-account"
	}
	ns, name, qualified := strings.Cut(v, "/")
	if !qualified {
		if !p.IsNamespaced() {
			return nil, fmt.Errorf("%s: %q: a GeneratingPolicy needs namespace/name", field, v)
		}
		ns, name = p.GetNamespace(), v
	}
	if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return nil, fmt.Errorf("%s: %q is not namespace/name of a ServiceAccount", field, v)
	}
	switch {
	case p.IsNamespaced() && ns != p.GetNamespace():
		return nil, fmt.Errorf("%s: %q: a NamespacedGeneratingPolicy runs as an account of its own namespace %q", field, v, p.GetNamespace())
	case !p.IsNamespaced() && !slices.Contains(a.Namespaces, ns):
		return nil, fmt.Errorf("%s: %q: namespace %q is not one whose accounts GeneratingPolicies may run as (--service-account-namespaces)", field, v, ns)
	}
	return &Account{Namespace: ns, Name: name}, nil
}
