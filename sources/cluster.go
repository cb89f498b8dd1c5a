package sources

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
)

// ClusterSourceName is the Source of policies stored in the cluster.
const ClusterSourceName = "cluster"

// Cluster delivers the GeneratingPolicies and NamespacedGeneratingPolicies
// stored in the cluster, watched through informers.
type Cluster struct {
	client dynamic.Interface
	// handlers are the registrations of our handlers: their HasSynced,
	// unlike the informers', waits until the handler has seen every listed
	// policy, so nothing is taken for deleted while still on its way.
	handlers []cache.ResourceEventHandlerRegistration
	// selector, if set, picks the policies delivered (SelectPolicies).
	selector labels.Selector
	// programs are the policies compiled, by UID.
	programs programs
	// exceptions, if set, are the PolicyExceptions watched (ReadExceptions).
	exceptions *clusterExceptions
}

var _ Source = (*Cluster)(nil)

// NewCluster returns a source of the policies stored in the cluster.
func NewCluster(client dynamic.Interface) *Cluster {
	return &Cluster{client: client}
}

// Start starts one informer per policy kind, and one on PolicyExceptions
// if asked for (ReadExceptions).
func (c *Cluster) Start(ctx context.Context, h Handler) error {
	if err := c.startExceptions(ctx, h); err != nil {
		return err
	}
	for _, gvr := range []schema.GroupVersionResource{apiv1.GeneratingPolicies, apiv1.NamespacedGeneratingPolicies} {
		var tweak dynamicinformer.TweakListOptionsFunc
		if c.selecting() {
			tweak = func(o *metav1.ListOptions) { o.LabelSelector = c.selector.String() }
		}
		inf := dynamicinformer.NewFilteredDynamicInformer(c.client, gvr, "", 0, cache.Indexers{}, tweak).Informer()
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.upsert(obj, h) },
			UpdateFunc: func(_, obj any) { c.upsert(obj, h) },
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				c.gone(ctx, obj, h)
			},
		})
		if err != nil {
			return fmt.Errorf("watch %s: %w", gvr.Resource, err)
		}
		c.handlers = append(c.handlers, reg)
		go inf.RunWithContext(ctx)
	}
	return nil
}

// Wait returns at once: informers hold nothing to clean up.
func (c *Cluster) Wait() {}

// Name is "cluster".
func (c *Cluster) Name() string { return ClusterSourceName }

// Complete is HasSynced: the informers' lists are whole.
func (c *Cluster) Complete() bool { return c.HasSynced() }

// HasSynced reports whether every policy listed at start has been handed over.
func (c *Cluster) HasSynced() bool {
	for _, reg := range c.handlers {
		if !reg.HasSynced() {
			return false
		}
	}
	return len(c.handlers) > 0
}

// upsert hands a new or changed policy to h, compiled.
func (c *Cluster) upsert(obj any, h Handler) {
	if p, ok := decode(obj, h); ok {
		p.Program = c.programs.compile(p.Policy)
		if !c.selecting() {
			p.CreatedVersion = createdVersion(p.Policy)
		}
		h.Upsert(p)
	}
}

// createdVersion is p's resourceVersion when nothing but its metadata can
// have been written since its creation: generation 1 (no spec write) and
// no status (no controller has written one). Under a selector a policy
// enters when it is labelled in, a write after its creation that this
// cannot see, so the caller asks only without one. A metadata write in
// the creation second, before Sprout first sees the policy, is the case
// left: the version is then later than the creation's.
func createdVersion(p apiv1.Policy) string {
	if p.GetGeneration() != 1 || !equality.Semantic.DeepEqual(*p.PolicyStatus(), apiv1.GeneratingPolicyStatus{}) {
		return ""
	}
	return p.GetResourceVersion()
}

// gone hands h a policy the informer no longer lists: released when it
// left the selection, deleted when it is gone from the cluster.
func (c *Cluster) gone(ctx context.Context, obj any, h Handler) {
	p, ok := decode(obj, h)
	if !ok {
		return
	}
	c.programs.forget(p.GetUID())
	if c.released(ctx, p) {
		h.Release(p)
		return
	}
	h.Delete(p)
}

// decode decodes a policy object. The API server's schema rejects most
// objects that would not decode; the rest are reported to h as invalid.
func decode(obj any, h Handler) (Policy, bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return Policy{}, false
	}
	p, err := apiv1.FromUnstructured(u)
	if err != nil {
		h.Invalid(ClusterSourceName, u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName(), err)
		return Policy{}, false
	}
	// The generation, not the resourceVersion: a status write is no new revision.
	return Policy{Policy: p, Source: ClusterSourceName, Revision: fmt.Sprintf("generation %d", u.GetGeneration())}, true
}

// programs keeps the program of each policy in the cluster while its
// generation stays: the policy is delivered again at every status write,
// which is no reason to compile it again.
type programs struct {
	mu    sync.Mutex
	byUID map[types.UID]compiled
}

// compiled is one generation of a policy, compiled.
type compiled struct {
	generation int64
	program    *celenv.Program
}

// compile returns the program of p's generation, compiling it the first
// time.
func (ps *programs) compile(p apiv1.Policy) *celenv.Program {
	ps.mu.Lock()
	c, ok := ps.byUID[p.GetUID()]
	ps.mu.Unlock()
	if ok && c.generation == p.GetGeneration() {
		return c.program
	}
	// Unlocked: the other kind's informer delivers meanwhile.
	prog := celenv.Compile(p)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.byUID == nil {
		ps.byUID = map[types.UID]compiled{}
	}
	ps.byUID[p.GetUID()] = compiled{generation: p.GetGeneration(), program: prog}
	return prog
}

// forget drops the program of a deleted policy.
func (ps *programs) forget(uid types.UID) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.byUID, uid)
}
