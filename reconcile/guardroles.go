package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
)

// roleGuard reads the roles that generated bindings refer to from caches
// of ClusterRoles and Roles, started with the first binding judged (a
// Sprout whose policies generate none needs neither the caches nor the
// RBAC to list roles), and queues a policy again when a role its bindings
// referred to changes: a role widened after its binding was made is judged
// at once, not at the next resync.
type roleGuard struct {
	once         sync.Once
	clusterRoles rbaclisters.ClusterRoleLister
	roles        rbaclisters.RoleLister
	synced       []cache.InformerSynced

	mu sync.Mutex
	// refs are the roles each policy's bindings referred to at its last
	// sync.
	refs map[policyKey]roleRefs
}

// roleRefs are roles a policy's bindings refer to, by roleName.
type roleRefs struct {
	names sets.Set[string]
	// anyClusterRole: one of them aggregates, so any ClusterRole may join
	// it by its labels.
	anyClusterRole bool
}

func roleName(kind, namespace, name string) string {
	if namespace == "" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}

// roleCaches starts the caches of roles, once, and waits for them up to
// downstreamSyncWait: after that the sync waits, as for its other caches.
func (c *Controller) roleCaches(ctx context.Context) error {
	g := &c.guard
	g.once.Do(func() {
		rbac := c.rbacInformers.Rbac().V1()
		g.clusterRoles, g.roles = rbac.ClusterRoles().Lister(), rbac.Roles().Lister()
		for _, inf := range []cache.SharedIndexInformer{rbac.ClusterRoles().Informer(), rbac.Roles().Informer()} {
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { c.roleChanged(obj) },
				UpdateFunc: func(_, obj any) { c.roleChanged(obj) },
				DeleteFunc: func(obj any) { c.roleChanged(obj) },
			}); err != nil {
				c.log.Error("watching roles", "error", err.Error())
			}
			g.synced = append(g.synced, inf.HasSynced)
		}
		c.rbacInformers.Start(c.ctx.Done())
	})
	err := wait.PollUntilContextTimeout(ctx, syncPollPeriod, downstreamSyncWait, true, func(context.Context) (bool, error) {
		return !slices.ContainsFunc(g.synced, func(s cache.InformerSynced) bool { return !s() }), nil
	})
	if err != nil {
		return errWaiting
	}
	return nil
}

// roleChanged queues the policies whose bindings referred to the role,
// or to an aggregated ClusterRole it may join.
func (c *Controller) roleChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	var name string
	cluster := false
	switch r := obj.(type) {
	case *rbacv1.ClusterRole:
		name, cluster = roleName("ClusterRole", "", r.Name), true
	case *rbacv1.Role:
		name = roleName("Role", r.Namespace, r.Name)
	default:
		return
	}
	c.guard.mu.Lock()
	defer c.guard.mu.Unlock()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for key, refs := range c.guard.refs {
		if _, ok := c.policies[key]; !ok {
			delete(c.guard.refs, key) // the policy is gone
			continue
		}
		if refs.names.Has(name) || cluster && refs.anyClusterRole {
			c.queue.Add(key)
		}
	}
}

// remember keeps the roles the policy's bindings referred to in a sync.
// A sync that stopped before judging every binding only adds to them.
func (g *roleGuard) remember(key policyKey, v *verdicts, complete bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refs == nil {
		g.refs = map[policyKey]roleRefs{}
	}
	prev, had := g.refs[key]
	switch {
	case v.refs.names.Len() == 0 && complete:
		delete(g.refs, key)
	case complete || !had:
		g.refs[key] = v.refs
	default:
		prev.names = prev.names.Union(v.refs.names)
		prev.anyClusterRole = prev.anyClusterRole || v.refs.anyClusterRole
		g.refs[key] = prev
	}
}

// roleRules returns the rules of the role a binding refers to, and the
// ClusterRoles it aggregates, if any. A RoleBinding's Role is in its
// namespace.
func (c *Controller) roleRules(ref rbacv1.RoleRef, namespace string, refs *roleRefs) ([]rbacv1.PolicyRule, []string, error) {
	switch ref.Kind {
	case "Role":
		refs.names.Insert(roleName("Role", namespace, ref.Name))
		role, err := c.guard.roles.Roles(namespace).Get(ref.Name)
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("the Role %s/%s does not exist, so what it grants cannot be checked", namespace, ref.Name)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("the Role %s/%s: %w", namespace, ref.Name, err)
		}
		return role.Rules, nil, nil
	case "ClusterRole":
		return c.clusterRoleRules(ref.Name, refs)
	}
	return nil, nil, fmt.Errorf("kind %q is neither Role nor ClusterRole", ref.Kind)
}

// clusterRoleRules returns the rules ClusterRole name grants: its own and,
// when it aggregates, those of every ClusterRole its selectors pick, and
// theirs in turn. That is what the aggregation controller fills its rules
// with, when it runs and has caught up: a role is judged by what it will
// grant, not by what it holds yet.
func (c *Controller) clusterRoleRules(name string, refs *roleRefs) ([]rbacv1.PolicyRule, []string, error) {
	refs.names.Insert(roleName("ClusterRole", "", name))
	role, err := c.guard.clusterRoles.Get(name)
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
		refs.anyClusterRole = true
		for i, s := range r.AggregationRule.ClusterRoleSelectors {
			sel, err := metav1.LabelSelectorAsSelector(&s)
			if err != nil {
				return nil, nil, fmt.Errorf("ClusterRole %s: aggregationRule.clusterRoleSelectors[%d]: %w", r.Name, i, err)
			}
			picked, err := c.guard.clusterRoles.List(sel)
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

// verdicts are, for one sync, the verdict on each role its bindings refer
// to, at each scope, the roles they are, and the bindings refused.
type verdicts struct {
	byRole  map[string]error
	refs    roleRefs
	refused sets.Set[bindingKey]
}

func newVerdicts() *verdicts {
	return &verdicts{byRole: map[string]error{}, refs: roleRefs{names: sets.New[string]()}, refused: sets.New[bindingKey]()}
}

// bindingKey names a binding.
type bindingKey struct{ kind, namespace, name string }

// judge says why a binding (a RoleBinding in namespace, or a
// ClusterRoleBinding: crb) must not bind ref, or nil; clusterWide judges
// the role as granted in every namespace.
func (c *Controller) judge(ref rbacv1.RoleRef, crb, clusterWide bool, namespace string, v *verdicts) error {
	if crb && ref.Kind != "ClusterRole" {
		return fmt.Errorf("roleRef.kind: a ClusterRoleBinding binds a ClusterRole, not %q", ref.Kind)
	}
	use := fmt.Sprintf("%s in every namespace: %t", roleName(ref.Kind, namespace, ref.Name), clusterWide)
	if ref.Kind == "ClusterRole" {
		use = fmt.Sprintf("ClusterRole/%s in every namespace: %t", ref.Name, clusterWide)
	}
	if err, ok := v.byRole[use]; ok {
		return err
	}
	err := c.judgeRole(ref, namespace, clusterWide, &v.refs)
	v.byRole[use] = err
	return err
}

func (c *Controller) judgeRole(ref rbacv1.RoleRef, namespace string, clusterWide bool, refs *roleRefs) error {
	rules, aggregated, err := c.roleRules(ref, namespace, refs)
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
