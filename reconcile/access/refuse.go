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

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
)

// Rejudged reports whether kinds hold a RoleBinding, ClusterRoleBinding or
// ClusterRole: objects of those do not settle, as every sync judges them
// again, the roles they bind or would extend having perhaps changed.
func Rejudged(kinds []schema.GroupVersionKind) bool {
	return slices.ContainsFunc(kinds, func(k schema.GroupVersionKind) bool {
		return IsBinding(k.GroupKind()) || isClusterRole(k.GroupKind())
	})
}

// Refuse drops the desired objects (of kinds) of p that Sprout must not
// write, and says why for each: a kind outside Options.AllowedKinds; an
// object that grants rights (GrantsRights) while p acts as Sprout itself,
// unless Options.AllowUnnamedGrants; a binding to a role that grants what
// p's identity does not hold (Guard.Judge), or a ClusterRole whose labels
// would extend an aggregated role p's identity may not escalate
// (Guard.JudgeClusterRole). The triggers of refused objects, by their
// LabelTriggerUID, join failed; the objects refused for what they grant
// are kept in v (Verdicts.RefusedAmong), which also keeps the verdict on
// each role, judged once per sync. The caches of roles start with the
// first binding or ClusterRole and run until stop is done; the error is
// ErrRolesNotCached while they are not synced, or a review that could not
// be asked: nothing is refused on a question not answered.
func (r *Rights) Refuse(ctx context.Context, stop <-chan struct{}, p apiv1.Policy, desired []*unstructured.Unstructured, kinds []schema.GroupVersionKind, v *Verdicts, failed sets.Set[string]) ([]*unstructured.Unstructured, []schema.GroupVersionKind, []error, error) {
	as, err := r.AccountOf(p)
	if err != nil {
		return nil, nil, nil, err
	}
	if Rejudged(kinds) {
		if err := r.guard.Caches(ctx, stop); err != nil {
			return nil, nil, nil, err
		}
	}
	var errs []error
	kept, keptKinds := desired[:0:0], kinds[:0:0]
	for i, obj := range desired {
		refused, failure := r.mayWrite(ctx, obj, kinds[i].GroupKind(), as, v)
		if failure != nil {
			// The sync waits and is retried, which names no cause: the log does.
			err := fmt.Errorf("%s: %w", inventory.ObjectID(obj), failure)
			r.rbac.log.Warn("access review failed: the policy's objects wait", "policy", p.GetName(), "error", err.Error())
			return nil, nil, nil, err
		}
		if refused != nil {
			errs = append(errs, fmt.Errorf("%s: refused: %w", inventory.ObjectID(obj), refused))
			failed.Insert(obj.GetLabels()[sproutv1alpha1.LabelTriggerUID])
			continue
		}
		kept, keptKinds = append(kept, obj), append(keptKinds, kinds[i])
	}
	return kept, keptKinds, errs, nil
}

// mayWrite says why obj must not be written as as, or nil; failed is a
// review that could not be asked.
func (r *Rights) mayWrite(ctx context.Context, obj *unstructured.Unstructured, gk schema.GroupKind, as *Account, v *Verdicts) (refused, failed error) {
	if len(r.opts.AllowedKinds) > 0 && !slices.Contains(r.opts.AllowedKinds, gk) {
		return fmt.Errorf("kind %s is not in --allowed-kinds", gk), nil
	}
	if why := GrantsRights(obj, gk); why != "" && as == nil && !r.opts.AllowUnnamedGrants {
		return fmt.Errorf("it grants rights (%s), and the policy acts as Sprout itself: name a ServiceAccount that holds them in metadata.annotations[%s], or start Sprout with --allow-unnamed-grants",
			why, AnnotationServiceAccount), nil
	}
	switch {
	case isClusterRole(gk):
		return r.guard.JudgeClusterRole(ctx, obj.GetName(), obj.GetLabels(), as, v)
	case !IsBinding(gk):
		return nil, nil
	}
	var binding struct {
		RoleRef rbacv1.RoleRef `json:"roleRef"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &binding); err != nil {
		return fmt.Errorf("roleRef: %w", err), nil
	}
	// In a protected namespace (kube-system, Sprout's own) the Secrets,
	// tokens and accounts are the cluster's: a RoleBinding there is judged
	// as a ClusterRoleBinding is.
	ns := obj.GetNamespace()
	crb := gk.Kind == "ClusterRoleBinding"
	protected := !crb && slices.Contains(r.opts.ProtectedNamespaces, ns)
	refused, failed = r.guard.Judge(ctx, binding.RoleRef, obj.GetName(), crb, crb || protected, ns, as, v)
	if refused != nil && protected {
		refused = fmt.Errorf("%w; in namespace %s, one of --protected-namespaces, a RoleBinding is judged as a ClusterRoleBinding", refused, ns)
	}
	return refused, failed
}

// RefusedAmong returns the objects of objs that v refused for what they
// grant: a role widened after its binding was made must not keep its
// binding until someone notices, nor a ClusterRole join an aggregated
// role that appeared after it, so they are pruned.
func (v *Verdicts) RefusedAmong(objs []*cluster.Object) []*cluster.Object {
	var refused []*cluster.Object
	for _, o := range objs {
		gk := o.GroupVersionKind().GroupKind()
		if (IsBinding(gk) || isClusterRole(gk)) && v.Refused(gk.Kind, o.GetNamespace(), o.GetName()) {
			refused = append(refused, o)
		}
	}
	return refused
}
