package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/inventory"
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
// a GeneratingPolicy only accounts of Options.ServiceAccountNamespaces.
const AnnotationServiceAccount = "sprout.dev/service-account"

// DefaultServiceAccount is the account a NamespacedGeneratingPolicy runs as,
// in its own namespace, unless it names one: a tenant's policy gets the
// rights its namespace grants that account, never Sprout's. Kubernetes
// makes "default" in every namespace, with no rights until they are bound.
const DefaultServiceAccount = "default"

// serviceAccount is the account a policy runs as.
type serviceAccount struct{ namespace, name string }

func (sa serviceAccount) String() string { return sa.namespace + "/" + sa.name }

func (sa serviceAccount) user() string {
	return "system:serviceaccount:" + sa.namespace + ":" + sa.name
}

// serviceAccountFor returns the account a policy runs as: its annotation;
// else, for a NamespacedGeneratingPolicy, Options.DefaultServiceAccount of
// its namespace; else none (Sprout's own).
func (c *Controller) serviceAccountFor(p apiv1.Policy) (*serviceAccount, error) {
	v, ok := p.GetAnnotations()[AnnotationServiceAccount]
	field := "metadata.annotations[" + AnnotationServiceAccount + "]"
	if !ok {
		if !p.IsNamespaced() || c.opts.DefaultServiceAccount == "" {
			return nil, nil
		}
		v, field = c.opts.DefaultServiceAccount, "--default-service-account"
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
	case !p.IsNamespaced() && !slices.Contains(c.opts.ServiceAccountNamespaces, ns):
		return nil, fmt.Errorf("%s: %q: namespace %q is not one whose accounts GeneratingPolicies may run as (--service-account-namespaces)", field, v, ns)
	}
	return &serviceAccount{namespace: ns, name: name}, nil
}

// ValidateServiceAccountOptions checks the accounts flags before anything
// connects: the default is a bare name (it lives in each policy's
// namespace), and the namespaces are namespace names.
func ValidateServiceAccountOptions(o Options) error {
	if o.DefaultServiceAccount != "" && len(validation.IsDNS1123Subdomain(o.DefaultServiceAccount)) > 0 {
		return fmt.Errorf("--default-service-account: %q is not the name of a ServiceAccount (it names one in each NamespacedGeneratingPolicy's namespace)", o.DefaultServiceAccount)
	}
	for _, ns := range o.ServiceAccountNamespaces {
		if len(validation.IsDNS1123Label(ns)) > 0 {
			return fmt.Errorf("--service-account-namespaces: %q is not a namespace name", ns)
		}
	}
	return nil
}

// accounts holds one writer per ServiceAccount, impersonating it.
type accounts struct {
	mu      sync.Mutex
	writers map[serviceAccount]writer
}

// writerFor returns the writer of sa, or Sprout's own for nil.
func (c *Controller) writerFor(sa *serviceAccount) (writer, error) {
	if sa == nil {
		return c.writer, nil
	}
	c.accounts.mu.Lock()
	defer c.accounts.mu.Unlock()
	if w, ok := c.accounts.writers[*sa]; ok {
		return w, nil
	}
	cfg := rest.CopyConfig(c.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: sa.user()}
	applier, err := inventory.NewApplier(cfg, c.created)
	if err != nil {
		return nil, err
	}
	w := c.writerOf(applier)
	if c.accounts.writers == nil {
		c.accounts.writers = map[serviceAccount]writer{}
	}
	c.accounts.writers[*sa] = w
	return w, nil
}

// mayRead asks whether sa may verb gvr in namespace (""
// for every namespace, or a cluster-scoped resource): the API server,
// once until RBAC changes (accessCache).
func (c *Controller) mayRead(ctx context.Context, sa serviceAccount, verb string, gvr schema.GroupVersionResource, namespace string) error {
	return c.may(ctx, &sa, verb, gvr, namespace)
}

// deniedError is the API server's answer that an account may not do
// something, as opposed to a review that could not be asked.
type deniedError struct{ msg string }

func (e *deniedError) Error() string { return e.msg }
