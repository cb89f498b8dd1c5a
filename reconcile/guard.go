package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sprout-gitops/sprout/inventory"
)

// AnnotationMaxObjectsPerTrigger on a policy overrides
// Options.MaxObjectsPerTrigger for it.
const AnnotationMaxObjectsPerTrigger = "sprout.dev/max-objects-per-trigger"

// DefaultMaxObjectsPerTrigger bounds what one evaluation may generate.
const DefaultMaxObjectsPerTrigger = 1000

// ReasonRefused is the Ready reason of a policy that generates objects
// Sprout must not write: kinds not allowed, bindings to all-powerful roles.
const ReasonRefused = "Refused"

// maxObjects is the cap on the objects one trigger may generate for a policy.
func (c *Controller) maxObjects(cp *compiledPolicy) (int, error) {
	v, ok := cp.policy.GetAnnotations()[AnnotationMaxObjectsPerTrigger]
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
// each: a kind outside Options.AllowedKinds, or a binding to a ClusterRole
// that grants every verb on every resource (unless
// Options.AllowWildcardBindings). The policy's other objects are written;
// nothing is pruned while any is refused. roles keeps what each ClusterRole
// grants, read once per sync.
func (c *Controller) refuse(ctx context.Context, desired []*unstructured.Unstructured, kinds []schema.GroupVersionKind, roles map[string]error) ([]*unstructured.Unstructured, []schema.GroupVersionKind, []error) {
	var errs []error
	kept, keptKinds := desired[:0:0], kinds[:0:0]
	for i, obj := range desired {
		if err := c.mayWrite(ctx, obj, kinds[i].GroupKind(), roles); err != nil {
			errs = append(errs, fmt.Errorf("%s: refused: %w", inventory.ObjectID(obj), err))
			continue
		}
		kept, keptKinds = append(kept, obj), append(keptKinds, kinds[i])
	}
	return kept, keptKinds, errs
}

// mayWrite says why obj must not be written, or nil. roles remembers the
// verdict on each ClusterRole already read: a policy that binds one role in
// every namespace reads it once.
func (c *Controller) mayWrite(ctx context.Context, obj *unstructured.Unstructured, gk schema.GroupKind, roles map[string]error) error {
	if len(c.opts.AllowedKinds) > 0 && !slices.Contains(c.opts.AllowedKinds, gk) {
		return fmt.Errorf("kind %s is not in --allowed-kinds", gk)
	}
	if !isBinding(gk) || c.opts.AllowWildcardBindings {
		return nil
	}
	var binding struct {
		RoleRef rbacv1.RoleRef `json:"roleRef"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &binding); err != nil {
		return fmt.Errorf("roleRef: %w", err)
	}
	if binding.RoleRef.Kind != "ClusterRole" {
		return nil // a Role grants only within its namespace
	}
	if err, ok := roles[binding.RoleRef.Name]; ok {
		return err
	}
	err := c.allPowerful(ctx, binding.RoleRef.Name)
	roles[binding.RoleRef.Name] = err
	return err
}

// isBinding reports whether gk is a RoleBinding or ClusterRoleBinding,
// which mayWrite checks against the ClusterRole it binds.
func isBinding(gk schema.GroupKind) bool {
	return gk.Group == rbacv1.GroupName && (gk.Kind == "RoleBinding" || gk.Kind == "ClusterRoleBinding")
}

// settles reports whether objects of kinds may settle (Controller.settle):
// not bindings, which every sync checks again, as the ClusterRole they
// bind may have changed.
func settles(kinds []schema.GroupVersionKind) bool {
	for _, k := range kinds {
		if isBinding(k.GroupKind()) {
			return false
		}
	}
	return true
}

// allPowerful says whether a ClusterRole grants every verb on every
// resource or URL, or cannot be checked.
func (c *Controller) allPowerful(ctx context.Context, name string) error {
	role, err := c.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("roleRef: ClusterRole %s does not exist, so what it grants cannot be checked", name)
	}
	if err != nil {
		return fmt.Errorf("roleRef: ClusterRole %s: %w", name, err)
	}
	for _, r := range role.Rules {
		if slices.Contains(r.Verbs, rbacv1.VerbAll) && slices.Contains(r.Resources, rbacv1.ResourceAll) {
			return fmt.Errorf("roleRef: ClusterRole %s grants every verb on every resource; --allow-wildcard-bindings permits this", name)
		}
		if slices.Contains(r.NonResourceURLs, "*") && slices.Contains(r.Verbs, rbacv1.VerbAll) {
			return fmt.Errorf("roleRef: ClusterRole %s grants every verb on every URL; --allow-wildcard-bindings permits this", name)
		}
	}
	return nil
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
