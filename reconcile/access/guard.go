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
	// it by its labels.
	AnyClusterRole bool
}

// Has reports whether a change of role (a ClusterRole: clusterRole) may
// change what the bindings grant.
func (r RoleRefs) Has(role string, clusterRole bool) bool {
	return r.Names.Has(role) || clusterRole && r.AnyClusterRole
}

// Merge adds o's roles to r.
func (r RoleRefs) Merge(o RoleRefs) RoleRefs {
	return RoleRefs{Names: r.Names.Union(o.Names), AnyClusterRole: r.AnyClusterRole || o.AnyClusterRole}
}

// Verdicts are, for one sync, the verdict on each role its bindings refer
// to, at each scope, the roles they are, and the bindings refused.
type Verdicts struct {
	byRole  map[string]error
	refs    RoleRefs
	refused sets.Set[bindingKey]
}

// NewVerdicts starts the verdicts of one sync.
func NewVerdicts() *Verdicts {
	return &Verdicts{byRole: map[string]error{}, refs: RoleRefs{Names: sets.New[string]()}, refused: sets.New[bindingKey]()}
}

// Refs are the roles the sync's bindings referred to.
func (v *Verdicts) Refs() RoleRefs { return v.refs }

// AnyRefused reports whether a binding was refused.
func (v *Verdicts) AnyRefused() bool { return v.refused.Len() > 0 }

// Refused reports whether the binding kind namespace/name was refused.
func (v *Verdicts) Refused(kind, namespace, name string) bool {
	return v.refused.Has(bindingKey{kind, namespace, name})
}

// bindingKey names a binding.
type bindingKey struct{ kind, namespace, name string }

// IsBinding reports whether gk is a RoleBinding or ClusterRoleBinding,
// which the Guard judges by the role it binds.
func IsBinding(gk schema.GroupKind) bool {
	return gk.Group == rbacv1.GroupName && (gk.Kind == "RoleBinding" || gk.Kind == "ClusterRoleBinding")
}

// Judge says why binding (a RoleBinding or ClusterRoleBinding: crb) in
// namespace must not bind ref, or nil; clusterWide judges the role as
// granted in every namespace. A refused binding is kept in v, and so is
// the verdict on its role, judged once per sync. Caches must have
// answered first.
func (g *Guard) Judge(ref rbacv1.RoleRef, binding string, crb, clusterWide bool, namespace string, v *Verdicts) error {
	err := g.judge(ref, crb, clusterWide, namespace, v)
	if err != nil {
		kind := "RoleBinding"
		if crb {
			kind = "ClusterRoleBinding"
		}
		v.refused.Insert(bindingKey{kind, namespace, binding})
	}
	return err
}

func (g *Guard) judge(ref rbacv1.RoleRef, crb, clusterWide bool, namespace string, v *Verdicts) error {
	if crb && ref.Kind != "ClusterRole" {
		return fmt.Errorf("roleRef.kind: a ClusterRoleBinding binds a ClusterRole, not %q", ref.Kind)
	}
	use := fmt.Sprintf("%s in every namespace: %t", RoleName(ref.Kind, namespace, ref.Name), clusterWide)
	if ref.Kind == "ClusterRole" {
		use = fmt.Sprintf("ClusterRole/%s in every namespace: %t", ref.Name, clusterWide)
	}
	if err, ok := v.byRole[use]; ok {
		return err
	}
	err := g.judgeRole(ref, namespace, clusterWide, &v.refs)
	v.byRole[use] = err
	return err
}

func (g *Guard) judgeRole(ref rbacv1.RoleRef, namespace string, clusterWide bool, refs *RoleRefs) error {
	rules, aggregated, err := g.roleRules(ref, namespace, refs)
	if err != nil {
		return fmt.Errorf("roleRef: %w", err)
	}
	grants := guardedGrants(rules, clusterWide)
	if len(grants) == 0 {
		return nil
	}
	what := ref.Kind + " " + ref.Name
	if len(aggregated) > 0 {
		what += " (with the ClusterRoles it aggregates: " + strings.Join(aggregated, ", ") + ")"
	}
	return fmt.Errorf("roleRef: %s grants %s (--allow-wildcard-bindings permits this)", what, strings.Join(grants, "; "))
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
