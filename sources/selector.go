package sources

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// Selective is a source that can deliver only the policies whose labels a
// selector matches (--policy-selector, --watch-label-selector), so that a
// cluster moves from Kyverno one policy at a time, or its policies are
// sharded across replicas as Flux shards its objects. A policy that stops
// matching is released (Handler.Release), not deleted: it still exists,
// and whoever selects it now takes over its objects and its record.
type Selective interface {
	// SelectPolicies sets the selector; call it before Start.
	SelectPolicies(sel labels.Selector)
	// Unselected reports whether the source holds the policy kind
	// namespace/name outside its selection: such a policy is another
	// shard's, and its record is not an orphan. When it cannot tell (the
	// API server does not answer), it says true: a record kept one restart
	// too long costs nothing, a policy pruned by mistake costs its objects.
	Unselected(ctx context.Context, kind, namespace, name string) bool
}

var (
	_ Selective = (*Cluster)(nil)
	_ Selective = (*poller)(nil)
)

// SelectPolicies makes the informers list and watch only the policies sel
// matches: the API server filters. A policy relabelled out of the selector
// comes as a deletion from the informer; the API server, asked again,
// tells a release from a deletion (released).
func (c *Cluster) SelectPolicies(sel labels.Selector) { c.selector = sel }

// selecting reports whether the source delivers only some policies.
func (c *Cluster) selecting() bool { return c.selector != nil && !c.selector.Empty() }

// released reports whether a policy the informer saw go still exists,
// outside the selection: relabelled, not deleted.
func (c *Cluster) released(ctx context.Context, p Policy) bool {
	if !c.selecting() {
		return false
	}
	kind := apiv1.GeneratingPolicyKind
	if p.IsNamespaced() {
		kind = apiv1.NamespacedGeneratingPolicyKind
	}
	return c.Unselected(ctx, kind, p.GetNamespace(), p.GetName())
}

// Unselected reads the policy from the API server: it is unselected when
// it exists, is not being deleted, and its labels do not match.
func (c *Cluster) Unselected(ctx context.Context, kind, namespace, name string) bool {
	if !c.selecting() {
		return false
	}
	gvr := apiv1.GeneratingPolicies
	if kind == apiv1.NamespacedGeneratingPolicyKind {
		gvr = apiv1.NamespacedGeneratingPolicies
	}
	u, err := c.client.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		return true
	}
	return u.GetDeletionTimestamp() == nil && !c.selector.Matches(labels.Set(u.GetLabels()))
}

// SelectPolicies makes every revision deliver only the policies sel
// matches; the others are read and compiled all the same, so a broken
// policy still rejects its revision.
func (p *poller) SelectPolicies(sel labels.Selector) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.selector = sel
}

// Unselected reports whether the last revision taken holds the policy but
// the selector leaves it out. Before the first revision nothing is known:
// no record is retired then anyway (Complete is false).
func (p *poller) Unselected(_ context.Context, kind, namespace, name string) bool {
	ref := kind + "/" + name
	if kind == apiv1.NamespacedGeneratingPolicyKind {
		ref = kind + "/" + namespace + "/" + name
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unselected[ref]
}

// selects reports whether sel (nil: everything) matches the policy's labels.
func selects(sel labels.Selector, set map[string]string) bool {
	return sel == nil || sel.Matches(labels.Set(set))
}
