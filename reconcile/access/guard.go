package access

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
)

// ErrRolesNotCached is the Guard's answer while its caches of roles are not
// synced: whoever asked waits, as for its other caches.
var ErrRolesNotCached = errors.New("waiting for the caches of roles to sync")

// rolesSyncWait is how long Caches waits for the caches of roles.
const rolesSyncWait = 2 * time.Second

// Guard judges the roles that generated bindings refer to, from caches of
// ClusterRoles and Roles, started with the first binding judged (a Sprout
// whose policies generate none needs neither the caches nor the RBAC to
// list roles). A role's change is told to the function it is given, so
// that whoever bound it can be judged again at once, not at the next
// resync.
type Guard struct {
	rbac    *RBAC
	changed func(role string, clusterRole bool)
	log     *slog.Logger

	once         sync.Once
	clusterRoles rbaclisters.ClusterRoleLister
	roles        rbaclisters.RoleLister
	synced       []cache.InformerSynced
}

// NewGuard reads roles through rbac's informers and tells changed of
// each role's change, by RoleName.
func NewGuard(rbac *RBAC, changed func(role string, clusterRole bool)) *Guard {
	return &Guard{rbac: rbac, changed: changed, log: rbac.log}
}

// RoleName names a role as RoleRefs hold it.
func RoleName(kind, namespace, name string) string {
	if namespace == "" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}

// Caches starts the caches of roles, once, running until stop is done,
// and waits for them for up to two seconds; ErrRolesNotCached after that.
func (g *Guard) Caches(ctx context.Context, stop <-chan struct{}) error {
	g.once.Do(func() {
		rbac := g.rbac.informers.Rbac().V1()
		g.clusterRoles, g.roles = rbac.ClusterRoles().Lister(), rbac.Roles().Lister()
		for _, inf := range []cache.SharedIndexInformer{rbac.ClusterRoles().Informer(), rbac.Roles().Informer()} {
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    g.roleChanged,
				UpdateFunc: func(_, obj any) { g.roleChanged(obj) },
				DeleteFunc: g.roleChanged,
			}); err != nil {
				g.log.Error("watching roles", "error", err.Error())
			}
			g.synced = append(g.synced, inf.HasSynced)
		}
		g.rbac.informers.Start(stop)
	})
	if !waitFor(ctx, rolesSyncWait, g.synced) {
		return ErrRolesNotCached
	}
	return nil
}

func (g *Guard) roleChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	switch r := obj.(type) {
	case *rbacv1.ClusterRole:
		g.changed(RoleName("ClusterRole", "", r.Name), true)
	case *rbacv1.Role:
		g.changed(RoleName("Role", r.Namespace, r.Name), false)
	}
}

// RoleRefs are the roles bindings referred to, by RoleName.
type RoleRefs struct {
	Names sets.Set[string]
	// AnyClusterRole: one of them aggregates, so any ClusterRole may join
	// it by its labels; or a labelled ClusterRole was judged, which any
	// ClusterRole's aggregationRule may come to select.
	AnyClusterRole bool
	// Held: a judgement asked what the policy's identity holds, which any
	// change to RBAC, a binding's included, may change.
	Held bool
}

// Has reports whether a change of role (a ClusterRole: clusterRole) may
// change what the bindings grant.
func (r RoleRefs) Has(role string, clusterRole bool) bool {
	return r.Names.Has(role) || clusterRole && r.AnyClusterRole
}

// Merge adds o's roles to r.
func (r RoleRefs) Merge(o RoleRefs) RoleRefs {
	return RoleRefs{Names: r.Names.Union(o.Names), AnyClusterRole: r.AnyClusterRole || o.AnyClusterRole, Held: r.Held || o.Held}
}

// Verdicts are, for one sync, the verdict on each role its bindings refer
// to, at each scope, the roles they are, and the objects refused for what
// they grant: bindings, and ClusterRoles that would join an aggregated
// role.
type Verdicts struct {
	byRole  map[string]error
	refs    RoleRefs
	refused sets.Set[objectKey]
}

// NewVerdicts starts the verdicts of one sync.
func NewVerdicts() *Verdicts {
	return &Verdicts{byRole: map[string]error{}, refs: RoleRefs{Names: sets.New[string]()}, refused: sets.New[objectKey]()}
}

// Refs are the roles the sync's bindings referred to.
func (v *Verdicts) Refs() RoleRefs { return v.refs }

// AnyRefused reports whether an object was refused for what it grants.
func (v *Verdicts) AnyRefused() bool { return v.refused.Len() > 0 }

// Refused reports whether the object kind namespace/name was refused for
// what it grants.
func (v *Verdicts) Refused(kind, namespace, name string) bool {
	return v.refused.Has(objectKey{kind, namespace, name})
}

// objectKey names a binding or ClusterRole.
type objectKey struct{ kind, namespace, name string }

// IsBinding reports whether gk is a RoleBinding or ClusterRoleBinding,
// which the Guard judges by the role it binds.
func IsBinding(gk schema.GroupKind) bool {
	return gk.Group == rbacv1.GroupName && (gk.Kind == "RoleBinding" || gk.Kind == "ClusterRoleBinding")
}

// isClusterRole reports whether gk is a ClusterRole, which the Guard
// judges by the aggregated roles its labels would extend.
func isClusterRole(gk schema.GroupKind) bool {
	return gk == schema.GroupKind{Group: rbacv1.GroupName, Kind: "ClusterRole"}
}

// Judge says why binding (a RoleBinding or ClusterRoleBinding: crb) in
// namespace must not bind ref when written as as (nil: Sprout itself), or
// nil: every permission the role grants, with the roles it aggregates,
// must be one as holds, in namespace or, clusterWide, in every namespace.
// A refused binding is kept in v, and so is the verdict on its role,
// judged once per sync. failed is a review that could not be asked: the
// binding is neither written nor refused. Caches must have answered first.
func (g *Guard) Judge(ctx context.Context, ref rbacv1.RoleRef, binding string, crb, clusterWide bool, namespace string, as *Account, v *Verdicts) (refused, failed error) {
	refused, failed = g.judge(ctx, ref, crb, clusterWide, namespace, as, v)
	if refused != nil {
		kind := "RoleBinding"
		if crb {
			kind = "ClusterRoleBinding"
		}
		v.refused.Insert(objectKey{kind, namespace, binding})
	}
	return refused, failed
}

func (g *Guard) judge(ctx context.Context, ref rbacv1.RoleRef, crb, clusterWide bool, namespace string, as *Account, v *Verdicts) (refused, failed error) {
	if crb && ref.Kind != "ClusterRole" {
		return fmt.Errorf("roleRef.kind: a ClusterRoleBinding binds a ClusterRole, not %q", ref.Kind), nil
	}
	scope := namespace
	if clusterWide {
		scope = ""
	}
	use := fmt.Sprintf("%s in namespace %q, URLs %t", RoleName(ref.Kind, namespace, ref.Name), scope, crb)
	if ref.Kind == "ClusterRole" {
		use = fmt.Sprintf("ClusterRole/%s in namespace %q, URLs %t", ref.Name, scope, crb)
	}
	if err, ok := v.byRole[use]; ok {
		return err, nil
	}
	v.refs.Held = true
	refused, failed = g.judgeRole(ctx, ref, namespace, scope, crb, as, &v.refs)
	if failed == nil {
		v.byRole[use] = refused
	}
	return refused, failed
}

// judgeRole asks whether as holds every permission of ref at scope; URLs
// only from a ClusterRoleBinding (crb), as RBAC grants them from no
// RoleBinding.
func (g *Guard) judgeRole(ctx context.Context, ref rbacv1.RoleRef, namespace, scope string, crb bool, as *Account, refs *RoleRefs) (refused, failed error) {
	rules, aggregated, err := g.roleRules(ref, namespace, refs)
	if err != nil {
		return fmt.Errorf("roleRef: %w", err), nil
	}
	qs := requestsOf(rules)
	if !crb {
		qs = slices.DeleteFunc(qs, func(q Request) bool { return q.Path != "" })
	}
	missing, failed := g.missing(ctx, as, qs, scope)
	if failed != nil || len(missing) == 0 {
		return nil, failed
	}
	what := ref.Kind + " " + ref.Name
	if len(aggregated) > 0 {
		what += " (with the ClusterRoles it aggregates: " + strings.Join(aggregated, ", ") + ")"
	}
	return fmt.Errorf("roleRef: %s grants what %s does not hold%s: %s", what, identity(as), where(scope, false), listed(missing)), nil
}

// JudgeClusterRole says why a ClusterRole named name and labelled labels
// must not be written as as (nil: Sprout itself), or nil: for every
// existing ClusterRole that the aggregation controller would extend with
// its rules (its aggregationRule selects those labels, or those of a role
// so extended), as must be allowed to escalate that role, which is what
// editing it to add those rules would need. A refused ClusterRole is kept
// in v; a policy that writes a labelled ClusterRole is judged again at any
// ClusterRole's change. failed is a review that could not be asked.
func (g *Guard) JudgeClusterRole(ctx context.Context, name string, labels map[string]string, as *Account, v *Verdicts) (refused, failed error) {
	if len(labels) == 0 {
		return nil, nil
	}
	v.refs.AnyClusterRole, v.refs.Held = true, true
	roles, err := g.clusterRoles.List(k8slabels.Everything())
	if err != nil {
		return nil, fmt.Errorf("ClusterRoles: %w", err)
	}
	var escalate []Request
	for _, r := range extendedBy(name, labels, roles) {
		escalate = append(escalate, Request{Verb: "escalate", Group: rbacv1.GroupName, Resource: "clusterroles", Name: r})
	}
	missing, failed := g.missing(ctx, as, escalate, "")
	if failed != nil || len(missing) == 0 {
		return nil, failed
	}
	v.refused.Insert(objectKey{"ClusterRole", "", name})
	return fmt.Errorf("metadata.labels: they add its rules to aggregated ClusterRoles, which %s may not extend: %s", identity(as), listed(missing)), nil
}

// extendedBy returns, sorted, the aggregated ClusterRoles of roles that a
// ClusterRole named name and labelled labels would extend: those whose
// aggregationRule selects its labels, and in turn those that select
// theirs (edit's rules flow into admin).
func extendedBy(name string, labels map[string]string, roles []*rbacv1.ClusterRole) []string {
	seen := sets.New(name)
	var out []string
	for next := []map[string]string{labels}; len(next) > 0; next = next[1:] {
		for _, r := range roles {
			if !seen.Has(r.Name) && r.AggregationRule != nil && selects(r.AggregationRule, next[0]) {
				seen.Insert(r.Name)
				out = append(out, r.Name)
				next = append(next, r.Labels)
			}
		}
	}
	slices.Sort(out)
	return out
}

// selects reports whether one of rule's selectors picks labels; a
// selector that does not parse picks nothing, as for the aggregation
// controller.
func selects(rule *rbacv1.AggregationRule, labels map[string]string) bool {
	for _, s := range rule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&s)
		if err == nil && !sel.Empty() && sel.Matches(k8slabels.Set(labels)) {
			return true
		}
	}
	return false
}

// reviewsAtOnce bounds the reviews one judgement asks at the same time:
// a role such as admin grants hundreds of permissions.
const reviewsAtOnce = 8

// missing asks whether as holds every one of qs in namespace, from the
// reviews' cache or the API server, and returns those it does not hold, in
// qs's order; failed joins the reviews that could not be asked.
func (g *Guard) missing(ctx context.Context, as *Account, qs []Request, namespace string) (missing []Request, failed error) {
	errs := make([]error, len(qs))
	var wg sync.WaitGroup
	slots := make(chan struct{}, reviewsAtOnce)
	for i, q := range qs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = g.rbac.reviews.Holds(ctx, as, q, namespace)
		})
	}
	wg.Wait()
	var failures []error
	for i, err := range errs {
		var denied *DeniedError
		switch {
		case errors.As(err, &denied):
			missing = append(missing, qs[i])
		case err != nil:
			failures = append(failures, err)
		}
	}
	return missing, errors.Join(failures...)
}

// identity names as in a refusal.
func identity(as *Account) string {
	if as == nil {
		return "Sprout"
	}
	return "ServiceAccount " + as.String()
}

// maxListed bounds the permissions a refusal lists.
const maxListed = 10

// listed lists qs, the first maxListed of them.
func listed(qs []Request) string {
	names := make([]string, 0, min(len(qs), maxListed))
	for _, q := range qs[:min(len(qs), maxListed)] {
		names = append(names, q.String())
	}
	out := strings.Join(names, "; ")
	if len(qs) > maxListed {
		out += fmt.Sprintf("; and %d more", len(qs)-maxListed)
	}
	return out
}

// roleRules returns the rules of the role a binding refers to, and the
// ClusterRoles it aggregates, if any. A RoleBinding's Role is in its
// namespace.
func (g *Guard) roleRules(ref rbacv1.RoleRef, namespace string, refs *RoleRefs) ([]rbacv1.PolicyRule, []string, error) {
	switch ref.Kind {
	case "Role":
		refs.Names.Insert(RoleName("Role", namespace, ref.Name))
		role, err := g.roles.Roles(namespace).Get(ref.Name)
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("the Role %s/%s does not exist, so what it grants cannot be checked", namespace, ref.Name)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("the Role %s/%s: %w", namespace, ref.Name, err)
		}
		return role.Rules, nil, nil
	case "ClusterRole":
		return g.clusterRoleRules(ref.Name, refs)
	}
	return nil, nil, fmt.Errorf("kind %q is neither Role nor ClusterRole", ref.Kind)
}

// clusterRoleRules returns the rules ClusterRole name grants: its own and,
// when it aggregates, those of every ClusterRole its selectors pick, and
// theirs in turn. That is what the aggregation controller fills its rules
// with, when it runs and has caught up: a role is judged by what it will
// grant, not by what it holds yet.
func (g *Guard) clusterRoleRules(name string, refs *RoleRefs) ([]rbacv1.PolicyRule, []string, error) {
	refs.Names.Insert(RoleName("ClusterRole", "", name))
	role, err := g.clusterRoles.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("the ClusterRole %s does not exist, so what it grants cannot be checked", name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ClusterRole %s: %w", name, err)
	}
	seen := sets.New(name)
	rules := slices.Clone(role.Rules)
	var aggregated []string
	for next := []*rbacv1.ClusterRole{role}; len(next) > 0; {
		r := next[0]
		next = next[1:]
		if r.AggregationRule == nil {
			continue
		}
		refs.AnyClusterRole = true
		for i, s := range r.AggregationRule.ClusterRoleSelectors {
			sel, err := metav1.LabelSelectorAsSelector(&s)
			if err != nil {
				return nil, nil, fmt.Errorf("ClusterRole %s: aggregationRule.clusterRoleSelectors[%d]: %w", r.Name, i, err)
			}
			picked, err := g.clusterRoles.List(sel)
			if err != nil {
				return nil, nil, fmt.Errorf("ClusterRole %s: %w", r.Name, err)
			}
			for _, p := range picked {
				if !seen.Has(p.Name) {
					seen.Insert(p.Name)
					aggregated = append(aggregated, p.Name)
					rules = append(rules, p.Rules...)
					next = append(next, p)
				}
			}
		}
	}
	slices.Sort(aggregated)
	return rules, aggregated, nil
}
