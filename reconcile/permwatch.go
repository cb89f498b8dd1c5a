package reconcile

import (
	"context"
	"errors"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// rbacResources are the objects whose changes change what an account may
// do.
var rbacResources = []schema.GroupVersionResource{
	rbacv1.SchemeGroupVersion.WithResource("clusterroles"),
	rbacv1.SchemeGroupVersion.WithResource("roles"),
	rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"),
	rbacv1.SchemeGroupVersion.WithResource("rolebindings"),
}

// rbacSettle is how long a recheck waits after an RBAC change: a chart
// writes its roles and bindings in a burst, checked once, and the
// authorizer of every API server has seen the change by then.
const rbacSettle = time.Second

// watchRBAC starts, once, informers on roles and bindings, whose changes
// forget every access review answered and recheck every policy. They need
// Sprout to list and watch all four kinds; without that, permissions are
// asked again once they are a minute old and at each resync, and a policy
// waiting for one retries with back-off.
func (c *Controller) watchRBAC(ctx context.Context) {
	c.access.expire.Store(true)
	for _, gvr := range rbacResources {
		if err := c.mayWatch(ctx, nil, gvr, ""); err != nil {
			c.log.Warn("RBAC changes are not watched: permissions are asked again after a minute, and at each resync", "reason", err.Error())
			return
		}
	}
	rbac := c.rbacInformers.Rbac().V1()
	handler := cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, isInInitialList bool) {
			if !isInInitialList {
				c.rbacChanged()
			}
		},
		UpdateFunc: func(old, obj any) {
			if !sameRBACVersion(old, obj) {
				c.rbacChanged()
			}
		},
		DeleteFunc: func(any) { c.rbacChanged() },
	}
	informers := []cache.SharedIndexInformer{rbac.ClusterRoles().Informer(), rbac.Roles().Informer(),
		rbac.ClusterRoleBindings().Informer(), rbac.RoleBindings().Informer()}
	for _, inf := range informers {
		if _, err := inf.AddEventHandler(handler); err != nil {
			c.log.Error("watching RBAC", "error", err.Error())
			return
		}
	}
	c.rbacInformers.Start(c.ctx.Done())
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, inf := range informers {
		synced = append(synced, inf.HasSynced)
	}
	if !waitSynced(ctx, synced...) {
		return
	}
	// A change between the first reviews and the listing is not lost.
	c.rbacChanged()
	c.rbacWatched.Store(true)
	c.access.expire.Store(false)
}

func sameRBACVersion(old, obj any) bool {
	o, ok1 := old.(interface{ GetResourceVersion() string })
	n, ok2 := obj.(interface{ GetResourceVersion() string })
	return ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion()
}

// rbacChanged forgets every review answered and asks for a recheck.
func (c *Controller) rbacChanged() {
	c.access.invalidate()
	select {
	case c.rechecks <- struct{}{}:
	default: // one is pending: it will see this change too
	}
}

// runPermissionRechecks rechecks the policies after each burst of RBAC
// changes until ctx is done.
func (c *Controller) runPermissionRechecks(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.rechecks:
		}
		settle := time.NewTimer(rbacSettle)
		select {
		case <-ctx.Done():
			settle.Stop()
			return
		case <-settle.C:
		}
		select {
		case <-c.rechecks: // changed meanwhile: this recheck sees it
			c.access.invalidate()
		default:
		}
		c.recheckPermissions(ctx)
		c.rechecked.Add(1)
	}
}

// recheckPermissions resolves every policy's rules again, and checks its
// permissions, from reviews asked once per account, verb and resource: a
// policy whose watched resources changed (a permission revoked, or a
// resource a wildcard names granted) gets them and is queued, and so is
// one whose RBACPermissionsGranted verdict changed. Informers no policy
// needs any more stop.
func (c *Controller) recheckPermissions(ctx context.Context) {
	c.mu.RLock()
	policies := make(map[policyKey]*compiledPolicy, len(c.policies))
	for key, cp := range c.policies {
		policies[key] = cp
	}
	c.mu.RUnlock()
	released := false
	for key, cp := range policies {
		if ctx.Err() != nil {
			return
		}
		if cp.policy.PolicySpec().MatchConstraints != nil && cp.program.Err() == nil {
			triggers, refused, err := c.resolveRules(cp.policy)
			var discoveryErr *discoveryError
			if errors.As(err, &discoveryErr) && !errors.As(cp.resolveErr, &discoveryErr) {
				// Discovery is down, not the policy: it keeps what it
				// watches.
				continue
			}
			if !slices.Equal(triggers, cp.triggers) || !slices.Equal(refused, cp.refused) || errorText(err) != errorText(cp.resolveErr) {
				next := *cp
				next.triggers, next.refused, next.resolveErr = triggers, refused, err
				c.mu.Lock()
				if c.policies[key] == cp {
					c.policies[key] = &next
				}
				c.mu.Unlock()
				c.ensureInformers(c.triggerKeys(&next)...)
				c.log.Info("permissions changed: triggers resolved again", "policy", key.String(), "triggers", len(triggers), "refused", len(refused))
				released = true
				c.queue.Add(key)
				continue
			}
		}
		now := verdictString(c.permissionVerdict(ctx, key, cp))
		if last := c.access.reported(key); last != nil && ctx.Err() == nil && verdictString(last.err) != now {
			c.queue.Add(key)
		}
	}
	if released {
		c.releaseInformers()
	}
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
