package access

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
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

// pollPeriod is how often a wait for caches looks again.
const pollPeriod = 5 * time.Millisecond

// RBAC watches roles and bindings. A change forgets every review answered
// and, once the changes of a burst have settled, asks for a recheck. Its
// informers also serve the Guard's role caches, so that starting them
// starts nothing else.
type RBAC struct {
	informers informers.SharedInformerFactory
	reviews   *Reviews
	log       *slog.Logger
	changes   chan struct{}
	watched   atomic.Bool
	rechecked atomic.Int64
}

// NewRBAC watches through kube, invalidating reviews.
func NewRBAC(kube kubernetes.Interface, reviews *Reviews, log *slog.Logger) *RBAC {
	return &RBAC{informers: informers.NewSharedInformerFactory(kube, 0), reviews: reviews, log: log, changes: make(chan struct{}, 1)}
}

// Watched reports whether RBAC changes are seen: until then, an answer may
// be up to a minute stale.
func (r *RBAC) Watched() bool { return r.watched.Load() }

// Rechecks counts the rechecks done; the first follows the watch's start.
func (r *RBAC) Rechecks() int64 { return r.rechecked.Load() }

// Shutdown stops the informers and waits for them.
func (r *RBAC) Shutdown() { r.informers.Shutdown() }

// Watch starts, once, informers on roles and bindings. They need Sprout to
// list and watch all four kinds; without that, answers are asked again
// once they are a minute old, and whoever waits for one retries. The
// informers run until stop is done.
func (r *RBAC) Watch(ctx context.Context, stop <-chan struct{}) {
	r.reviews.Expire(true)
	for _, gvr := range rbacResources {
		if err := r.reviews.MayWatch(ctx, nil, gvr, ""); err != nil {
			r.log.Warn("RBAC changes are not watched: permissions are asked again after a minute, and at each resync", "reason", err.Error())
			return
		}
	}
	rbac := r.informers.Rbac().V1()
	handler := cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, isInInitialList bool) {
			if !isInInitialList {
				r.Changed()
			}
		},
		UpdateFunc: func(old, obj any) {
			if !sameVersion(old, obj) {
				r.Changed()
			}
		},
		DeleteFunc: func(any) { r.Changed() },
	}
	infs := []cache.SharedIndexInformer{rbac.ClusterRoles().Informer(), rbac.Roles().Informer(),
		rbac.ClusterRoleBindings().Informer(), rbac.RoleBindings().Informer()}
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(handler); err != nil {
			r.log.Error("watching RBAC", "error", err.Error())
			return
		}
	}
	r.informers.Start(stop)
	synced := make([]cache.InformerSynced, 0, len(infs))
	for _, inf := range infs {
		synced = append(synced, inf.HasSynced)
	}
	if !waitFor(ctx, 0, synced) {
		return
	}
	// A change between the first reviews and the listing is not lost.
	r.Changed()
	r.watched.Store(true)
	r.reviews.Expire(false)
}

func sameVersion(old, obj any) bool {
	o, ok1 := old.(interface{ GetResourceVersion() string })
	n, ok2 := obj.(interface{ GetResourceVersion() string })
	return ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion()
}

// Changed forgets every review answered and asks for a recheck.
func (r *RBAC) Changed() {
	r.reviews.Invalidate()
	select {
	case r.changes <- struct{}{}:
	default: // one is pending: it will see this change too
	}
}

// RunRechecks calls recheck after each burst of RBAC changes, once it has
// settled, until ctx is done.
func (r *RBAC) RunRechecks(ctx context.Context, recheck func(context.Context)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.changes:
		}
		settle := time.NewTimer(rbacSettle)
		select {
		case <-ctx.Done():
			settle.Stop()
			return
		case <-settle.C:
		}
		select {
		case <-r.changes: // changed meanwhile: this recheck sees it
			r.reviews.Invalidate()
		default:
		}
		recheck(ctx)
		r.rechecked.Add(1)
	}
}

// waitFor waits for every one of synced, up to timeout (0: until ctx is
// done).
func waitFor(ctx context.Context, timeout time.Duration, synced []cache.InformerSynced) bool {
	all := func(context.Context) (bool, error) {
		for _, s := range synced {
			if !s() {
				return false, nil
			}
		}
		return true, nil
	}
	if timeout == 0 {
		return wait.PollUntilContextCancel(ctx, pollPeriod, true, all) == nil
	}
	return wait.PollUntilContextTimeout(ctx, pollPeriod, timeout, true, all) == nil
}
