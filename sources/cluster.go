package sources

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
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
}

var _ Source = (*Cluster)(nil)

// NewCluster returns a source of the policies stored in the cluster.
func NewCluster(client dynamic.Interface) *Cluster {
	return &Cluster{client: client}
}

// Start starts one informer per policy kind.
func (c *Cluster) Start(ctx context.Context, h Handler) error {
	for _, gvr := range []schema.GroupVersionResource{apiv1.GeneratingPolicies, apiv1.NamespacedGeneratingPolicies} {
		var tweak dynamicinformer.TweakListOptionsFunc
		if c.selector != nil && !c.selector.Empty() {
			tweak = func(o *metav1.ListOptions) { o.LabelSelector = c.selector.String() }
		}
		inf := dynamicinformer.NewFilteredDynamicInformer(c.client, gvr, "", 0, cache.Indexers{}, tweak).Informer()
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { deliver(obj, h, h.Upsert) },
			UpdateFunc: func(_, obj any) { deliver(obj, h, h.Upsert) },
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				deliver(obj, h, h.Delete)
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

// deliver decodes a policy object and hands it to one of h's methods. The
// API server's schema rejects most objects that would not decode; the rest
// are reported as invalid.
func deliver(obj any, h Handler, to func(Policy)) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	p, err := apiv1.FromUnstructured(u)
	if err != nil {
		h.Invalid(ClusterSourceName, u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName(), err)
		return
	}
	// The generation, not the resourceVersion: a status write is no new revision.
	to(Policy{Policy: p, Source: ClusterSourceName, Revision: fmt.Sprintf("generation %d", u.GetGeneration())})
}
