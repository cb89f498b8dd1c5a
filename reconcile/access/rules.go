package access

// Resolving a policy's rules into the resources its triggers are:
// discovery, wildcards, and what Sprout and the policy's account may read.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// DiscoveryError marks a failure to resolve rules that is the API
// server's, not the policy's: it blocks pruning and is retried at the next
// sync.
type DiscoveryError struct{ err error }

func (e *DiscoveryError) Error() string { return "discovery: " + e.err.Error() }
func (e *DiscoveryError) Unwrap() error { return e.err }

// Stalls is false: discovery coming back cures it (report.Stalling).
func (e *DiscoveryError) Stalls() bool { return false }

// PermissionError marks trigger resources Sprout, or the ServiceAccount a
// policy runs as, may not list and watch. Like a discovery failure it
// blocks the policy, pruning included; unlike one, a denial is not retried
// at every sync: the policy waits for the permission, and an RBAC change
// asks again (RBAC.RunRechecks). failed marks a review that could not be
// asked, which is retried.
type PermissionError struct {
	err    error
	failed bool
}

func (e *PermissionError) Error() string { return e.err.Error() }
func (e *PermissionError) Unwrap() error { return e.err }

// Stalls is true: only a change to RBAC cures it (report.Stalling).
func (e *PermissionError) Stalls() bool { return true }

// DiscoveryFailed reports whether resolving rules failed with err because
// discovery did.
func DiscoveryFailed(err error) bool {
	var discoveryErr *DiscoveryError
	return errors.As(err, &discoveryErr)
}

// Blocked reports whether resolving a policy's rules failed with
// resolveErr in a way that leaves its triggers unknown until a later sync
// asks again.
func Blocked(resolveErr error) bool {
	var permErr *PermissionError
	return DiscoveryFailed(resolveErr) || errors.As(resolveErr, &permErr)
}

// WaitsForPermission reports whether a policy blocked by resolveErr only
// waits for a permission that an RBAC change will grant: it need not be
// retried, as long as RBAC changes are watched.
func (r *Rights) WaitsForPermission(resolveErr error) bool {
	var permErr *PermissionError
	return r.rbac.Watched() && !DiscoveryFailed(resolveErr) &&
		errors.As(resolveErr, &permErr) && !permErr.failed
}

// Resolve lists the resources p's rules name, expanding "*" through
// discovery. Subresources (pods/exec, */status) exist only as admission
// requests and cannot be watched: they are reported, and the rest is
// watched. A NamespacedGeneratingPolicy is confined to its namespace, so
// cluster-scoped resources never trigger it. Only what Sprout, and the
// ServiceAccount the policy runs as, may list and watch is watched: a
// wildcard expands to those resources alone, and a resource named
// outright that either may not read is refused, and a PermissionError. A
// DiscoveryError leaves the accounts unasked.
func (r *Rights) Resolve(ctx context.Context, p apiv1.Policy) (triggers, refused []schema.GroupVersionResource, _ error) {
	rules := p.PolicySpec().MatchConstraints.ResourceRules
	out, named, err := r.resolveOnce(p, rules)
	if len(out) == 0 {
		// Perhaps a CRD installed since discovery was cached: look again.
		r.discovery.Invalidate()
		out, named, err = r.resolveOnce(p, rules)
	}
	if DiscoveryFailed(err) {
		return out, nil, err
	}
	out, refused, denied := r.readable(ctx, p, out, named)
	return out, refused, errors.Join(err, denied)
}

// readable keeps the resources Sprout and the policy's ServiceAccount may
// list and watch in its scope. named are those its rules name without a
// wildcard: refusing one of them is an error, and it is returned in
// refused.
func (r *Rights) readable(ctx context.Context, p apiv1.Policy, gvrs []schema.GroupVersionResource, named sets.Set[schema.GroupVersionResource]) (kept, refused []schema.GroupVersionResource, _ error) {
	sa, err := r.AccountOf(p)
	if err != nil {
		// Nothing is watched for a policy whose account is wrong: its
		// sync reports the account.
		return nil, nil, err
	}
	scope := scopeOf(p)
	var errs []error
	failed := false
	for _, gvr := range gvrs {
		err := r.reviews.MayWatch(ctx, sa, gvr, r.namespace(scope, gvr))
		var denied *DeniedError
		switch {
		case err == nil:
			kept = append(kept, gvr)
		case named.Has(gvr) || !errors.As(err, &denied):
			// A review that failed says nothing of a wildcard's resource
			// either: dropping it would prune what it generated.
			errs = append(errs, fmt.Errorf("spec.matchConstraints.resourceRules: %w", err))
			refused = append(refused, gvr)
			failed = failed || !errors.As(err, &denied)
		}
	}
	if len(errs) > 0 {
		return kept, refused, &PermissionError{err: errors.Join(errs...), failed: failed}
	}
	return kept, refused, nil
}

func (r *Rights) resolveOnce(p apiv1.Policy, rules []admissionregistrationv1.NamedRuleWithOperations) (out []schema.GroupVersionResource, named sets.Set[schema.GroupVersionResource], _ error) {
	named = sets.New[schema.GroupVersionResource]()
	lists, err := r.discovery.Resources()
	if err != nil && (len(lists) == 0 || failedGroupMatters(err, rules)) {
		// A group the rules name did not answer: its kinds would be
		// missing, and their downstreams pruned.
		return nil, nil, &DiscoveryError{err}
	}
	var errs []error
	for i, rule := range rules {
		for _, res := range rule.Resources {
			if strings.Contains(res, "/") {
				errs = append(errs, fmt.Errorf("spec.matchConstraints.resourceRules[%d]: subresource %q is only seen by admission webhooks and can never trigger", i, res))
			}
		}
		if slices.Contains(rule.Operations, admissionregistrationv1.Connect) {
			errs = append(errs, fmt.Errorf("spec.matchConstraints.resourceRules[%d]: operation CONNECT is only seen by admission webhooks and can never trigger", i))
		}
		if !slices.ContainsFunc(rule.Operations, func(op admissionregistrationv1.OperationType) bool { return op != admissionregistrationv1.Connect }) {
			continue // nothing of this rule can be watched
		}
		for _, list := range lists {
			gv, err := schema.ParseGroupVersion(list.GroupVersion)
			if err != nil {
				continue
			}
			if !matchesAny(rule.APIGroups, gv.Group) || !matchesAny(rule.APIVersions, gv.Version) {
				continue
			}
			for _, res := range list.APIResources {
				if strings.Contains(res.Name, "/") || !matchesAny(rule.Resources, res.Name) ||
					!slices.Contains(res.Verbs, "list") || !slices.Contains(res.Verbs, "watch") {
					continue
				}
				gvr := gv.WithResource(res.Name)
				if !res.Namespaced && p.IsNamespaced() {
					if slices.Contains(rule.Resources, res.Name) {
						errs = append(errs, fmt.Errorf("spec.matchConstraints.resourceRules[%d]: %s is cluster-scoped and can never trigger a NamespacedGeneratingPolicy", i, ResourceName(gvr)))
					}
					continue
				}
				if slices.Contains(rule.Resources, res.Name) {
					named.Insert(gvr)
				}
				if !slices.Contains(out, gvr) {
					out = append(out, gvr)
				}
			}
		}
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("spec.matchConstraints.resourceRules: no served resource matches"))
	}
	return out, named, errors.Join(errs...)
}

// failedGroupMatters reports whether a partial discovery failure concerns a
// group and version the rules name; a broken, unrelated aggregated API
// (metrics, say) does not stop policies.
func failedGroupMatters(err error, rules []admissionregistrationv1.NamedRuleWithOperations) bool {
	var failed *discovery.ErrGroupDiscoveryFailed
	if !errors.As(err, &failed) {
		return true
	}
	for gv := range failed.Groups {
		for _, r := range rules {
			if matchesAny(r.APIGroups, gv.Group) && matchesAny(r.APIVersions, gv.Version) {
				return true
			}
		}
	}
	return false
}

func matchesAny(patterns []string, s string) bool {
	return slices.Contains(patterns, "*") || slices.Contains(patterns, s)
}
