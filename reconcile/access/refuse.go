package access

// The binding guard's use in a sync: which of the objects a policy
// generates Sprout must not write.

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
)

// AnyBinding reports whether kinds hold a RoleBinding or
// ClusterRoleBinding: objects of those do not settle, as every sync judges
// them again, the role they bind having perhaps changed.
func AnyBinding(kinds []schema.GroupVersionKind) bool {
	return slices.ContainsFunc(kinds, func(k schema.GroupVersionKind) bool { return IsBinding(k.GroupKind()) })
}

// Refuse drops the desired objects (of kinds) Sprout must not write, and
// says why for each: a kind outside Options.AllowedKinds, or a binding to
// a role that grants what guardedGrants refuses (unless
// Options.AllowWildcardBindings). The triggers of refused objects, by
// their LabelTriggerUID, join failed; the bindings refused for their role
// are kept in v (Verdicts.RefusedAmong), which also keeps the verdict on
// each role, judged once per sync. The caches of roles start with the
// first binding and run until stop is done; ErrRolesNotCached while they
// are not synced.
func (r *Rights) Refuse(ctx context.Context, stop <-chan struct{}, desired []*unstructured.Unstructured, kinds []schema.GroupVersionKind, v *Verdicts, failed sets.Set[string]) ([]*unstructured.Unstructured, []schema.GroupVersionKind, []error, error) {
	if !r.opts.AllowWildcardBindings && AnyBinding(kinds) {
		if err := r.guard.Caches(ctx, stop); err != nil {
			return nil, nil, nil, err
		}
	}
	var errs []error
	kept, keptKinds := desired[:0:0], kinds[:0:0]
	for i, obj := range desired {
		if err := r.mayWrite(obj, kinds[i].GroupKind(), v); err != nil {
			errs = append(errs, fmt.Errorf("%s: refused: %w", inventory.ObjectID(obj), err))
			failed.Insert(obj.GetLabels()[sproutv1alpha1.LabelTriggerUID])
			continue
		}
		kept, keptKinds = append(kept, obj), append(keptKinds, kinds[i])
	}
	return kept, keptKinds, errs, nil
}

// mayWrite says why obj must not be written, or nil.
func (r *Rights) mayWrite(obj *unstructured.Unstructured, gk schema.GroupKind, v *Verdicts) error {
	if len(r.opts.AllowedKinds) > 0 && !slices.Contains(r.opts.AllowedKinds, gk) {
		return fmt.Errorf("kind %s is not in --allowed-kinds", gk)
	}
	if !IsBinding(gk) || r.opts.AllowWildcardBindings {
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
	protected := !crb && slices.Contains(r.opts.ProtectedNamespaces, ns)
	err := r.guard.Judge(binding.RoleRef, obj.GetName(), crb, crb || protected, ns, v)
	if err != nil && protected {
		err = fmt.Errorf("%w; in namespace %s, one of --protected-namespaces, a RoleBinding is judged as a ClusterRoleBinding", err, ns)
	}
	return err
}

// RefusedAmong returns the bindings of objs that v refused for the role
// they bind: a role widened after its binding was made must not keep its
// binding until someone notices, so they are pruned.
func (v *Verdicts) RefusedAmong(objs []*cluster.Object) []*cluster.Object {
	var refused []*cluster.Object
	for _, o := range objs {
		gk := o.GroupVersionKind().GroupKind()
		if IsBinding(gk) && v.Refused(gk.Kind, o.GetNamespace(), o.GetName()) {
			refused = append(refused, o)
		}
	}
	return refused
}
