package access

import (
	"context"
	"log/slog"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// Rights answers what a policy's rights allow: the account it acts as
// (ActingAs), the resources its rules resolve to that it and Sprout may
// read (Resolve), whether it holds every permission it needs (Check), and
// which of the objects it generates Sprout must not write (Refuse). It
// owns the reviews, the RBAC watch and the Guard it answers from.
type Rights struct {
	opts      Options
	reviews   *Reviews
	rbac      *RBAC
	guard     *Guard
	discovery Discovery
	namespace func(scope string, gvr schema.GroupVersionResource) string
}

// Options are the operator's bounds on what policies may do.
type Options struct {
	// Accounts says which account a policy acts as.
	Accounts Accounts
	// AllowedKinds, when not empty, are the only kinds Sprout writes.
	AllowedKinds []schema.GroupKind
	// AllowUnnamedGrants lets a policy that acts as Sprout itself write
	// objects that grant rights (GrantsRights), judged as Sprout's.
	AllowUnnamedGrants bool
	// ProtectedNamespaces are those whose Secrets and accounts are the
	// cluster's: a RoleBinding there is judged as a ClusterRoleBinding.
	ProtectedNamespaces []string
}

// Discovery lists what the API server serves (kinds.Kinds).
type Discovery interface {
	// Resources lists the served resources; a partial failure lists what
	// answered, with the error.
	Resources() ([]*metav1.APIResourceList, error)
	// Invalidate makes the next listing ask the API server again.
	Invalidate()
}

// Config is what Rights is made of.
type Config struct {
	Options   Options
	Kube      kubernetes.Interface
	Log       *slog.Logger
	Discovery Discovery
	// WatchNamespace is the namespace ("" for every one) of the informer
	// that serves gvr to the policies of scope, where Sprout needs to
	// list and watch it.
	WatchNamespace func(scope string, gvr schema.GroupVersionResource) string
	// RoleChanged is told of each role's change (NewGuard).
	RoleChanged func(role string, clusterRole bool)
}

// New makes the rights of cfg; nothing runs until RBAC().Watch.
func New(cfg Config) *Rights {
	reviews := NewReviews(cfg.Kube.AuthorizationV1())
	rbac := NewRBAC(cfg.Kube, reviews, cfg.Log)
	return &Rights{opts: cfg.Options, reviews: reviews, rbac: rbac, guard: NewGuard(rbac, cfg.RoleChanged),
		discovery: cfg.Discovery, namespace: cfg.WatchNamespace}
}

// Reviews are the access reviews the answers come from.
func (r *Rights) Reviews() *Reviews { return r.reviews }

// RBAC is the watch that tells when the answers are stale.
func (r *Rights) RBAC() *RBAC { return r.rbac }

// Protect adds namespaces to Options.ProtectedNamespaces. Call it before
// anything is refused.
func (r *Rights) Protect(namespaces ...string) {
	r.opts.ProtectedNamespaces = append(r.opts.ProtectedNamespaces, namespaces...)
}

// AccountOf returns the account p acts as, nil for Sprout's own
// (Accounts.For).
func (r *Rights) AccountOf(p apiv1.Policy) (*Account, error) { return r.opts.Accounts.For(p) }

// InvalidAccountError is an account a policy may not name: the policy, or
// a flag, must change.
type InvalidAccountError struct{ err error }

func (e *InvalidAccountError) Error() string { return e.err.Error() }
func (e *InvalidAccountError) Unwrap() error { return e.err }

// ActingAs returns the account p acts as, nil for Sprout's own, once
// Sprout may impersonate it: an account Sprout may not impersonate is
// refused with what Sprout lacks (a DeniedError), not left to fail at the
// first request made as it. An account p may not name is an
// InvalidAccountError.
func (r *Rights) ActingAs(ctx context.Context, p apiv1.Policy) (*Account, error) {
	as, err := r.AccountOf(p)
	if err != nil {
		return nil, &InvalidAccountError{err}
	}
	if as != nil {
		if err := r.reviews.MayImpersonate(ctx, *as); err != nil {
			return nil, err
		}
	}
	return as, nil
}

// Check checks what p needs, from the reviews' cache: get, list and watch
// on what it reads (its triggers, those it was refused included, and what
// its last sync read), and every verb of WriteVerbs on what it wrote, for
// the account it acts as (Sprout's own when none); and list and watch for
// Sprout, whose informers watch them all. It returns nil when everything
// is granted, else an error naming each verb and resource missing: the
// RBACPermissionsGranted verdict.
func (r *Rights) Check(ctx context.Context, p apiv1.Policy, read, written sets.Set[schema.GroupVersionResource]) error {
	sa, err := r.AccountOf(p)
	if err != nil {
		return err
	}
	scope := scopeOf(p)
	needs := make([]Need, 0, read.Len()+written.Len())
	for gvr := range read {
		ns := r.namespace(scope, gvr)
		needs = append(needs, Need{GVR: gvr, Namespace: ns, Verbs: ReadVerbs, SproutNamespace: &ns})
	}
	everywhere := "" // generated objects are watched everywhere
	for gvr := range written {
		needs = append(needs, Need{GVR: gvr, Namespace: r.namespace(scope, gvr), Verbs: WriteVerbs, SproutNamespace: &everywhere})
	}
	return r.reviews.Check(ctx, sa, needs)
}

// scopeOf is the namespace a policy is confined to, "" for none.
func scopeOf(p apiv1.Policy) string {
	if p.IsNamespaced() {
		return p.GetNamespace()
	}
	return ""
}
