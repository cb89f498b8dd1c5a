package reconcile

import (
	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/reconcile/access"
)

// AnnotationServiceAccount on a policy names the ServiceAccount it acts
// as (access.AnnotationServiceAccount).
const AnnotationServiceAccount = access.AnnotationServiceAccount

// DefaultServiceAccount is the account a NamespacedGeneratingPolicy acts
// as, in its own namespace, unless it names one
// (access.DefaultServiceAccount).
const DefaultServiceAccount = access.DefaultServiceAccount

// accounts says which account a policy acts as, by the options.
func (o Options) accounts() access.Accounts {
	return access.Accounts{Default: o.DefaultServiceAccount, Namespaces: o.ServiceAccountNamespaces}
}

// ValidateServiceAccountOptions checks the accounts flags before anything
// connects.
func ValidateServiceAccountOptions(o Options) error { return o.accounts().Validate() }

// accountOf returns the account a policy acts as, nil for Sprout's own.
func (c *Controller) accountOf(p apiv1.Policy) (*access.Account, error) {
	return c.opts.accounts().For(p)
}
