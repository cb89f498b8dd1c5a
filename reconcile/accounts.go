package reconcile

import (
	"context"

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

// invalidAccountError is an account a policy may not name: the policy,
// or a flag, must change.
type invalidAccountError struct{ err error }

func (e *invalidAccountError) Error() string { return e.err.Error() }
func (e *invalidAccountError) Unwrap() error { return e.err }

// actingAs returns the account a policy acts as, nil for Sprout's own,
// once Sprout may impersonate it: an account Sprout may not impersonate
// is refused with what Sprout lacks (an access.DeniedError), not left to
// fail at the first request made as it.
func (c *Controller) actingAs(ctx context.Context, p apiv1.Policy) (*access.Account, error) {
	as, err := c.accountOf(p)
	if err != nil {
		return nil, &invalidAccountError{err}
	}
	if as != nil {
		if err := c.reviews.MayImpersonate(ctx, *as); err != nil {
			return nil, err
		}
	}
	return as, nil
}
