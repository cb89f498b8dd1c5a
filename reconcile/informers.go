package reconcile

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/cluster"
)

// watchKey names one trigger informer: a resource in every namespace
// (namespace ""), or in the one namespace the NamespacedGeneratingPolicies
// of that namespace are confined to, and the objects of it that a label
// selector selects, all of them when it is "" (pushdown.go).
type watchKey struct {
	gvr       schema.GroupVersionResource
	namespace string
	selector  string
}

func (w watchKey) String() string {
	s := w.resource()
	if w.selector != "" {
		s += " with " + w.selector
	}
	return s
}

// resource names what w watches, whatever its selector.
func (w watchKey) resource() string {
	if w.namespace == "" {
		return resourceName(w.gvr)
	}
	return resourceName(w.gvr) + " in " + w.namespace
}

// scope is the namespace a policy's watches are confined to: its own for a
// NamespacedGeneratingPolicy, "" (every namespace) for a GeneratingPolicy.
func (cp *compiledPolicy) scope() string {
	if cp.policy.IsNamespaced() {
		return cp.policy.GetNamespace()
	}
	return ""
}

// watchKeyOf is the unfiltered informer that serves gvr to policies of
// scope: a cluster-scoped resource has one, whatever the scope.
func (c *Controller) watchKeyOf(scope string, gvr schema.GroupVersionResource) watchKey {
	if scope == "" {
		return watchKey{gvr: gvr} // every event asks for every policy
	}
	if namespaced, _ := c.namespacedResources.Load(gvr); namespaced == false {
		return watchKey{gvr: gvr}
	}
	return watchKey{gvr: gvr, namespace: scope}
}

// watches reports whether the policy is served by informer w, for its
// triggers or for what its last sync read. The caller holds c.mu.
func (c *Controller) watches(key policyKey, cp *compiledPolicy, w watchKey) bool {
	return c.triggeredBy(cp, w) || c.readsFrom(key, cp, w)
}

// triggerInformer watches one trigger resource, in every namespace or in
// one, for every policy that names it.
type triggerInformer struct {
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	// objects counts what the cache holds, from its handler's events, for
	// sprout_informer_objects: listing the keys at each scrape cost a copy
	// of every key, many times a second under a tight scrape.
	objects atomic.Int64
	// updated holds, for triggers whose last event was an UPDATE, the state
	// before it, kept only while a policy reads oldObject or request.
	updated lastUpdates
}

// lastUpdates maps a trigger's UID to its state before its last UPDATE.
type lastUpdates struct {
	mu  sync.Mutex
	old map[types.UID]*cluster.Object
}

func (l *lastUpdates) set(uid types.UID, old *cluster.Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old == nil {
		delete(l.old, uid)
		return
	}
	if l.old == nil {
		l.old = map[types.UID]*cluster.Object{}
	}
	l.old[uid] = old
}

func (l *lastUpdates) get(uid types.UID) *cluster.Object {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.old[uid]
}

// newInformer makes an informer on w's resource in its namespace, whose cache
// holds cachedObjects: managed fields dropped (Sprout never reads them and
// they are often half the size), the rest as JSON.
//
// Triggers are watched in JSON, even built-in ones: watched in protobuf,
// as generated objects are, the Namespaces of make bench's burst (scenario
// 8) were created with a higher Create p99 against the baseline's than in
// JSON, though Sprout spent no more CPU decoding them
// (docs/performance.md).
func newInformer(client dynamic.Interface, raw rest.Interface, w watchKey) cache.SharedIndexInformer {
	return cluster.NewInformer(client, raw, cluster.Resource{GVR: w.gvr, Namespace: w.namespace, LabelSelector: w.selector}, nil, cluster.Triggers)
}

// needNamespaces starts the Namespace cache, which namespaced triggers
// need (namespaceSelector, namespaceObject); starting it again is a no-op.
func (c *Controller) needNamespaces() {
	c.kubeInformers.Start(c.ctx.Done())
}

// namespacesSynced reports whether the Namespace cache is ready for a
// policy's triggers: it need not be when none is namespaced.
func (c *Controller) namespacesSynced(triggers []schema.GroupVersionResource) bool {
	for _, gvr := range triggers {
		if namespaced, _ := c.namespacedResources.Load(gvr); namespaced == true {
			return c.kubeInformers.Core().V1().Namespaces().Informer().HasSynced()
		}
	}
	return true
}

// ensureInformers starts the informers of keys not running yet.
func (c *Controller) ensureInformers(keys ...watchKey) {
	for _, w := range keys {
		if namespaced, _ := c.namespacedResources.Load(w.gvr); namespaced != false {
			c.needNamespaces() // namespaced, or not known to be cluster-scoped
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range keys {
		if _, ok := c.informer[w]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(c.ctx)
		inf := newInformer(c.dynamic, c.raw, w)
		ti := &triggerInformer{informer: inf, cancel: cancel}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, isInInitialList bool) {
				ti.objects.Add(1)
				// An object listed at start-up already existed: it is not a
				// CREATE, and admits nothing. The policies are queued once
				// the whole list is in, not once per object.
				if isInInitialList {
					return
				}
				c.onTrigger(w, admission.Create, obj, nil)
			},
			UpdateFunc: func(old, obj any) {
				switch {
				case sameVersion(old, obj):
					return // a re-list, not a change
				case onlyStatusChanged(old, obj):
					// A webhook on the resource never sees a status write
					// (it goes to the status subresource): requeue, admit nothing.
					c.onTrigger(w, "", obj, old)
				default:
					c.onTrigger(w, admission.Update, obj, old)
				}
			},
			DeleteFunc: func(obj any) {
				ti.objects.Add(-1)
				c.onTrigger(w, admission.Delete, obj, nil)
			},
		})
		c.informer[w] = ti
		go inf.RunWithContext(ctx)
		started := time.Now()
		go func() {
			// A sync before the list is in waits (errWaiting, with back-off
			// up to seconds): the policies go at once when it is.
			if cache.WaitFor(ctx, "", inf.HasSyncedChecker()) {
				c.log.Info("triggers listed", "resource", w.String(), "objects", len(inf.GetStore().ListKeys()), "duration", time.Since(started))
				c.queueWatching(w)
			}
		}()
		c.log.Info("watching triggers", "resource", w.String())
	}
}

// onlyStatusChanged reports whether an update changed nothing but status
// (and the metadata every write changes).
func onlyStatusChanged(old, obj any) bool {
	oc, ok1 := old.(*cluster.Object)
	nc, ok2 := obj.(*cluster.Object)
	if !ok1 || !ok2 {
		return false
	}
	o, n := oc.Decode(), nc.Decode()
	strip := func(u *unstructured.Unstructured) map[string]any {
		m := make(map[string]any, len(u.Object))
		for k, v := range u.Object {
			if k != "status" && k != "metadata" {
				m[k] = v
			}
		}
		meta := u // decoded for this comparison alone
		meta.SetResourceVersion("")
		meta.SetManagedFields(nil)
		meta.SetGeneration(0)
		m["metadata"] = meta.Object["metadata"]
		return m
	}
	return equality.Semantic.DeepEqual(strip(o), strip(n))
}

func sameVersion(old, obj any) bool {
	o, ok1 := old.(*cluster.Object)
	n, ok2 := obj.(*cluster.Object)
	return ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion()
}

// releaseInformers stops the informers no policy needs any more: trigger
// and source informers no policy's rules or reads name, downstream
// informers of resources no policy, running or being cleaned up, wrote to.
func (c *Controller) releaseInformers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	needed := sets.New[watchKey]()
	for key, cp := range c.policies {
		needed.Insert(c.triggerKeys(cp)...)
		for gvr := range c.dependencies[key] {
			needed.Insert(c.watchKeyOf(cp.scope(), gvr))
		}
	}
	for w, ti := range c.informer {
		if !needed.Has(w) {
			ti.cancel()
			delete(c.informer, w)
			c.log.Info("stopped watching triggers", "resource", w.String())
		}
	}
	written := sets.New[schema.GroupVersionResource]()
	for _, w := range c.written {
		written = written.Union(w)
	}
	for gvr, ti := range c.downstream {
		if !written.Has(gvr) {
			ti.cancel()
			delete(c.downstream, gvr)
			c.log.Info("stopped watching generated objects", "resource", resourceName(gvr))
		}
	}
}

// Watched lists the resources the controller watches for triggers and
// clone sources, each once whatever the selectors of its informers, and
// for generated objects, as resource.version.group.
func (c *Controller) Watched() (triggers, generated []string) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	watched := sets.New[string]()
	for w := range c.informer {
		watched.Insert(w.resource())
	}
	for gvr := range c.downstream {
		generated = append(generated, resourceName(gvr))
	}
	slices.Sort(generated)
	return sets.List(watched), generated
}

func (c *Controller) stopTriggerInformers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w, ti := range c.informer {
		ti.cancel()
		delete(c.informer, w)
	}
	for gvr, ti := range c.downstream {
		ti.cancel()
		delete(c.downstream, gvr)
	}
}

// onTrigger replays an informer event as the admission event a webhook would
// have seen. A CREATE or UPDATE that a policy's rules select admits the
// trigger for that policy, if w serves the policy's triggers; every event
// queues the policies w serves. op is empty for objects that existed
// before Sprout started watching.
func (c *Controller) onTrigger(w watchKey, op admission.Operation, obj, old any) {
	gvr := w.gvr
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, ok := obj.(*cluster.Object)
	if !ok {
		return
	}
	c.mu.RLock()
	var interested, triggered []*compiledPolicy
	read := sets.New[policyKey]() // the policies that read gvr
	for key, cp := range c.policies {
		switch {
		case c.triggeredBy(cp, w):
			triggered = append(triggered, cp)
			interested = append(interested, cp)
		case c.readsFrom(key, cp, w):
			interested = append(interested, cp)
		}
		if c.dependencies[key].Has(gvr) {
			read.Insert(key)
		}
	}
	ti := c.informer[w]
	c.mu.RUnlock()
	c.rememberUpdate(ti, triggered, op, o, old)
	if op == admission.Delete {
		c.forgetReported(w, triggered, o)
	}
	var labelled *metav1.PartialObjectMetadata // decoded once, if a selector reads labels
	for _, cp := range interested {
		key := keyOf(cp.policy)
		if cp.policy.IsNamespaced() && o.GetNamespace() != cp.policy.GetNamespace() {
			continue // confined to its namespace: it never sees another's triggers
		}
		if op != "" && slices.Contains(triggered, cp) {
			crit := cp.criteria.events
			sel := labelled
			if !crit.readsLabels() {
				sel = o.Selectable(false)
			} else if sel == nil {
				labelled = o.Selectable(true)
				sel = labelled
			}
			ok, err := c.matcher.matches(crit, gvr, op, o.GroupVersionKind(), sel)
			switch {
			case err != nil || !ok:
			case op == admission.Delete:
				c.tombstones.add(key, trigger{gvr: gvr, object: o, deleted: true})
			case !derives(cp.derives, o.Created(), cp.activated):
				c.admitted.admit(key, o.GetUID())
			}
		}
		c.queueTrigger(key, cp, gvr, read.Has(key), op, o, old)
	}
}

// queueTrigger queues a policy for an event on o: for that trigger, and,
// when the policy's evaluations read gvr, for the triggers that read o
// (deps.go), or in full when those are not known.
func (c *Controller) queueTrigger(key policyKey, cp *compiledPolicy, gvr schema.GroupVersionResource, read bool, op admission.Operation, o *cluster.Object, old any) {
	prev, _ := old.(*cluster.Object)
	isTrigger := slices.Contains(cp.triggers, gvr)
	if read && !c.queueReaders(key, gvr, o, prev) || !read && !isTrigger {
		c.queue.Add(key)
		return
	}
	if !isTrigger {
		return
	}
	d := dirtyTrigger{gvr: gvr, key: objectRef(o)}
	switch {
	case op == admission.Delete:
		d.old = o
	case prev != nil:
		d.old = prev
	}
	c.queue.addTrigger(key, o.GetUID(), d, 0)
}

// queueWatching queues every policy that informer w serves, for triggers
// or reads.
func (c *Controller) queueWatching(w watchKey) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for key, cp := range c.policies {
		if c.watches(key, cp, w) {
			c.queue.Add(key)
		}
	}
}

// rememberUpdate keeps the state before an UPDATE for the policies that
// read oldObject or request; any other event forgets it.
func (c *Controller) rememberUpdate(ti *triggerInformer, triggered []*compiledPolicy, op admission.Operation, o *cluster.Object, old any) {
	if ti == nil {
		return
	}
	prev, _ := old.(*cluster.Object)
	if op != admission.Update || prev == nil || !slices.ContainsFunc(triggered, func(cp *compiledPolicy) bool { return cp.program.ReadsEvent() }) {
		ti.updated.set(o.GetUID(), nil)
		return
	}
	ti.updated.set(o.GetUID(), prev)
}

// lastUpdate returns the state of a trigger before its last UPDATE, or nil.
func (c *Controller) lastUpdate(w watchKey, uid types.UID) *cluster.Object {
	c.mu.RLock()
	ti := c.informer[w]
	c.mu.RUnlock()
	if ti == nil {
		return nil
	}
	return ti.updated.get(uid)
}

// setDependencies records the resources a policy's last sync read.
func (c *Controller) setDependencies(key policyKey, read sets.Set[schema.GroupVersionResource]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dependencies[key] = read
}

// resourceName spells a resource as kubectl does: resource.version.group.
func resourceName(gvr schema.GroupVersionResource) string {
	return strings.TrimSuffix(gvr.Resource+"."+gvr.Version+"."+gvr.Group, ".")
}
