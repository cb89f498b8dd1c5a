package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// AnnotationMaxObjectsPerTrigger on a policy overrides
// Options.MaxObjectsPerTrigger for it.
const AnnotationMaxObjectsPerTrigger = "sprout.dev/max-objects-per-trigger"

// DefaultMaxObjectsPerTrigger bounds what one evaluation may generate.
const DefaultMaxObjectsPerTrigger = 1000

// ReasonRefused is the Ready reason of a policy that generates objects
// Sprout must not write: kinds not allowed, bindings to roles that grant
// too much (guardedGrants).
const ReasonRefused = report.ReasonRefused

// maxObjects is the cap on the objects one trigger may generate for a policy.
func (c *Controller) maxObjects(cp *policy.Compiled) (int, error) {
	v, ok := cp.Policy.GetAnnotations()[AnnotationMaxObjectsPerTrigger]
	if !ok {
		return c.opts.MaxObjectsPerTrigger, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("metadata.annotations[%s]: %q is not a positive number", AnnotationMaxObjectsPerTrigger, v)
	}
	return n, nil
}

// refuse drops the desired objects Sprout must not write, and says why for
// each: a kind outside Options.AllowedKinds, or a binding to a role that
// grants what guardedGrants refuses (unless Options.AllowWildcardBindings).
// The policy's other objects are written; the triggers of refused objects
// join failed, whose objects are not pruned, but the bindings refused for
// their role, which v lists, are (pruneRefused). v keeps the verdict on each role, judged once per sync.
// An error is the caches of roles not ready: the sync waits.
func (c *Controller) refuse(ctx context.Context, desired []*unstructured.Unstructured, kinds []schema.GroupVersionKind, v *access.Verdicts, failed sets.Set[string]) ([]*unstructured.Unstructured, []schema.GroupVersionKind, []error, error) {
	if !c.opts.AllowWildcardBindings && slices.ContainsFunc(kinds, func(k schema.GroupVersionKind) bool { return access.IsBinding(k.GroupKind()) }) {
		if err := c.guard.Caches(ctx, c.ctx.Done()); err != nil {
			return nil, nil, nil, errWaiting
		}
	}
	var errs []error
	kept, keptKinds := desired[:0:0], kinds[:0:0]
	for i, obj := range desired {
		if err := c.mayWrite(obj, kinds[i].GroupKind(), v); err != nil {
			errs = append(errs, fmt.Errorf("%s: refused: %w", inventory.ObjectID(obj), err))
			failed.Insert(obj.GetLabels()[sproutv1alpha1.LabelTriggerUID])
			continue
		}
		kept, keptKinds = append(kept, obj), append(keptKinds, kinds[i])
	}
	return kept, keptKinds, errs, nil
}

// mayWrite says why obj must not be written, or nil.
func (c *Controller) mayWrite(obj *unstructured.Unstructured, gk schema.GroupKind, v *access.Verdicts) error {
	if len(c.opts.AllowedKinds) > 0 && !slices.Contains(c.opts.AllowedKinds, gk) {
		return fmt.Errorf("kind %s is not in --allowed-kinds", gk)
	}
	if !access.IsBinding(gk) || c.opts.AllowWildcardBindings {
		return nil
	}
	var binding struct {
		RoleRef rbacv1.RoleRef `json:"roleRef"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &binding); err != nil {
		return fmt.Errorf("roleRef: %w", err)
	}
	// In a protected namespace (kube-system, Sprout's own) the Secrets,
	// tokens and accounts are the cluster's: a RoleBinding there is judged
	// as a ClusterRoleBinding is.
	ns := obj.GetNamespace()
	crb := gk.Kind == "ClusterRoleBinding"
	protected := !crb && slices.Contains(c.opts.ProtectedNamespaces, ns)
	err := c.guard.Judge(binding.RoleRef, obj.GetName(), crb, crb || protected, ns, v)
	if err != nil && protected {
		err = fmt.Errorf("%w; in namespace %s, one of --protected-namespaces, a RoleBinding is judged as a ClusterRoleBinding", err, ns)
	}
	return err
}

// Protect adds namespaces to Options.ProtectedNamespaces: those whose
// Secrets and accounts are the cluster's, or Sprout's own once it knows
// them. Call it before Run.
func (c *Controller) Protect(namespaces ...string) {
	c.opts.ProtectedNamespaces = append(c.opts.ProtectedNamespaces, namespaces...)
}

// roleChanged queues the policies whose bindings referred to the role, or
// to an aggregated ClusterRole it may join.
func (c *Controller) roleChanged(role string, clusterRole bool) {
	c.states.each(func(key policy.Key, st *policyState) {
		if st.boundTo(role, clusterRole) {
			c.queue.Add(key)
		}
	})
}

// settles reports whether objects of kinds may settle (Controller.settle):
// not bindings, which every sync judges again, as the role they bind may
// have changed.
func settles(kinds []schema.GroupVersionKind) bool {
	for _, k := range kinds {
		if access.IsBinding(k.GroupKind()) {
			return false
		}
	}
	return true
}

// pruneRefused deletes the bindings the policy made that are refused now
// for the role they bind: a role widened after its binding was made must
// not keep its binding until someone notices. Only those: the policy's
// other objects stay, as any refusal keeps its prune from running.
func (c *Controller) pruneRefused(ctx context.Context, w writer, key policy.Key, v *access.Verdicts) (inventory.ChangeSet, error) {
	if !v.AnyRefused() {
		return inventory.ChangeSet{}, nil
	}
	owned, err := c.ledger.Owned(key)
	if err != nil {
		return inventory.ChangeSet{}, err
	}
	var refused []*cluster.Object
	for _, o := range owned {
		gk := o.GroupVersionKind().GroupKind()
		if access.IsBinding(gk) && v.Refused(gk.Kind, o.GetNamespace(), o.GetName()) {
			refused = append(refused, o)
		}
	}
	if len(refused) == 0 {
		return inventory.ChangeSet{}, nil
	}
	return w.Prune(ctx, cluster.Decoded(refused))
}

// ParseKinds reads "Kind" and "Kind.group" names, as --allowed-kinds takes
// them ("ConfigMap,NetworkPolicy.networking.k8s.io").
func ParseKinds(names []string) ([]schema.GroupKind, error) {
	out := make([]schema.GroupKind, 0, len(names))
	for _, n := range names {
		gk := schema.ParseGroupKind(n)
		if gk.Kind == "" {
			return nil, fmt.Errorf("%q is not Kind or Kind.group", n)
		}
		out = append(out, gk)
	}
	return out, nil
}
