package reconcile

// Resolving a policy's rules into the resources its triggers are: discovery,
// wildcards, and what Sprout and the policy's account may read.

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/reconcile/access"
)

// discoveryError marks a failure to resolve rules that is the API server's,
// not the policy's: it blocks pruning and is retried at the next sync.
type discoveryError struct{ err error }

func (e *discoveryError) Error() string { return "discovery: " + e.err.Error() }
func (e *discoveryError) Unwrap() error { return e.err }

// Stalls is false: discovery coming back cures it (report.Stalling).
func (e *discoveryError) Stalls() bool { return false }

// permissionError marks trigger resources Sprout, or the ServiceAccount a
// policy runs as, may not list and watch. Like a discovery failure it
// blocks the policy, pruning included; unlike one, a denial is not retried
// at every sync: the policy waits for the permission, and an RBAC change
// asks again (recheckPermissions). failed marks a review that could not be
// asked, which is retried.
type permissionError struct {
	err    error
	failed bool
}

func (e *permissionError) Error() string { return e.err.Error() }
func (e *permissionError) Unwrap() error { return e.err }

// Stalls is true: only a change to RBAC cures it (report.Stalling).
func (e *permissionError) Stalls() bool { return true }

// resolveRules lists the resources p's rules name, expanding "*" through
// discovery. Subresources (pods/exec, */status) exist only as admission
// requests and cannot be watched: they are reported, and the rest is watched.
// A NamespacedGeneratingPolicy is confined to its namespace, so
// cluster-scoped resources never trigger it. Only what Sprout, and the
// ServiceAccount the policy runs as, may list and watch is watched: a
// wildcard expands to those resources alone, and a resource named outright
// that either may not read is refused, and a permissionError.
func (c *Controller) resolveRules(p apiv1.Policy) (triggers, refused []schema.GroupVersionResource, _ error) {
	rules := p.PolicySpec().MatchConstraints.ResourceRules
	out, named, err := c.resolveRulesOnce(p, rules)
	if len(out) == 0 {
		// Perhaps a CRD installed since discovery was cached: look again.
		c.kinds.Invalidate()
		out, named, err = c.resolveRulesOnce(p, rules)
	}
	var discoveryErr *discoveryError
	if errors.As(err, &discoveryErr) {
		return out, nil, err
	}
	out, refused, denied := c.readable(p, out, named)
	return out, refused, errors.Join(err, denied)
}

// readable keeps the resources Sprout and the policy's ServiceAccount may
// list and watch in its scope. named are those its rules name without a
// wildcard: refusing one of them is an error, and it is returned in
// refused.
func (c *Controller) readable(p apiv1.Policy, gvrs []schema.GroupVersionResource, named sets.Set[schema.GroupVersionResource]) (kept, refused []schema.GroupVersionResource, _ error) {
	sa, err := c.accountOf(p)
	if err != nil {
		// Nothing is watched for a policy whose account is wrong: its
		// sync reports the account.
		return nil, nil, err
	}
	scope := ""
	if p.IsNamespaced() {
		scope = p.GetNamespace()
	}
	var errs []error
	failed := false
	for _, gvr := range gvrs {
		err := c.reviews.MayWatch(c.ctx, sa, gvr, c.intake.watchKeyOf(scope, gvr).Namespace)
		var denied *access.DeniedError
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
		return kept, refused, &permissionError{err: errors.Join(errs...), failed: failed}
	}
	return kept, refused, nil
}

func (c *Controller) resolveRulesOnce(p apiv1.Policy, rules []admissionregistrationv1.NamedRuleWithOperations) (out []schema.GroupVersionResource, named sets.Set[schema.GroupVersionResource], _ error) {
	named = sets.New[schema.GroupVersionResource]()
	lists, err := c.kinds.Resources()
	if err != nil && (len(lists) == 0 || failedGroupMatters(err, rules)) {
		// A group the rules name did not answer: its kinds would be
		// missing, and their downstreams pruned.
		return nil, nil, &discoveryError{err}
	}
	var errs []error
	for i, r := range rules {
		for _, res := range r.Resources {
			if strings.Contains(res, "/") {
				errs = append(errs, fmt.Errorf("spec.matchConstraints.resourceRules[%d]: subresource %q is only seen by admission webhooks and can never trigger", i, res))
			}
		}
		if slices.Contains(r.Operations, admissionregistrationv1.Connect) {
			errs = append(errs, fmt.Errorf("spec.matchConstraints.resourceRules[%d]: operation CONNECT is only seen by admission webhooks and can never trigger", i))
		}
		if !slices.ContainsFunc(r.Operations, func(op admissionregistrationv1.OperationType) bool { return op != admissionregistrationv1.Connect }) {
			continue // nothing of this rule can be watched
		}
		for _, list := range lists {
			gv, err := schema.ParseGroupVersion(list.GroupVersion)
			if err != nil {
				continue
			}
			if !matchesAny(r.APIGroups, gv.Group) || !matchesAny(r.APIVersions, gv.Version) {
				continue
			}
			for _, res := range list.APIResources {
				if strings.Contains(res.Name, "/") || !matchesAny(r.Resources, res.Name) ||
					!slices.Contains(res.Verbs, "list") || !slices.Contains(res.Verbs, "watch") {
					continue
				}
				gvr := gv.WithResource(res.Name)
				if !res.Namespaced && p.IsNamespaced() {
					if slices.Contains(r.Resources, res.Name) {
						errs = append(errs, fmt.Errorf("spec.matchConstraints.resourceRules[%d]: %s is cluster-scoped and can never trigger a NamespacedGeneratingPolicy", i, resourceName(gvr)))
					}
					continue
				}
				if slices.Contains(r.Resources, res.Name) {
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
