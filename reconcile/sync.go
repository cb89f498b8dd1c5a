package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"

	apiv1 "github.com/sprout-gitops/sprout/api/v1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/inventory"
)

// evaluationTimeout bounds the evaluation of one policy for one trigger.
const evaluationTimeout = 5 * time.Second

// trigger is one admitted, matching trigger object.
type trigger struct {
	gvr    schema.GroupVersionResource
	object *unstructured.Unstructured
}

// sync makes the cluster hold what one policy wants, computed from the
// informer caches as they are now. Phases: load the compiled policy → find
// its admitted, matching triggers → evaluate the desired set → apply →
// report status.
func (c *Controller) sync(ctx context.Context, key policyKey) error {
	c.mu.RLock()
	cp := c.policies[key]
	c.mu.RUnlock()
	if cp == nil {
		return nil // deleted; what it leaves behind is decided by its orphan setting
	}
	if err := cp.program.Err(); err != nil {
		// Terminal until the policy changes: retrying cannot fix a typo.
		return c.reportStatus(ctx, cp, outcome{reason: ReasonCompileFailed, err: err})
	}
	if !c.triggersSynced(cp) {
		c.queue.AddAfter(key, 100*time.Millisecond)
		return nil
	}

	triggers, err := c.matchingTriggers(cp)
	if err != nil {
		return errors.Join(err, c.reportStatus(ctx, cp, outcome{reason: ReasonMatchFailed, err: err}))
	}
	reader := newCacheReader(c)
	desired, matched, evalErr := c.desired(ctx, cp, triggers, reader)
	c.setDependencies(key, reader.resources())
	changes, applyErr := c.applier.Apply(ctx, desired, inventory.ApplyOptions{Synchronize: cp.policy.PolicySpec().Synchronize()})
	if changed := changes.Changed(); len(changed) > 0 {
		c.log.Info("applied", "policy", key.String(), "changes", changed)
	}
	var notOwned error
	if s := changes.NotOwned(); s != "" {
		notOwned = fmt.Errorf("not written, not Sprout's for this policy and trigger: %s", s)
	}

	out := outcome{triggers: matched, objects: len(desired), err: errors.Join(cp.resolveErr, evalErr, applyErr, notOwned)}
	switch {
	case applyErr != nil:
		out.reason = ReasonApplyFailed
	case evalErr != nil:
		out.reason = ReasonEvaluationFailed
	case notOwned != nil:
		out.reason = ReasonNotOwned
	case cp.resolveErr != nil:
		out.reason = ReasonUnobservableTrigger
	}
	statusErr := c.reportStatus(ctx, cp, out)
	return errors.Join(evalErr, applyErr, statusErr)
}

// triggersSynced reports whether every trigger informer of the policy has
// listed its objects: before that the cache would look empty.
func (c *Controller) triggersSynced(cp *compiledPolicy) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, gvr := range cp.triggers {
		ti, ok := c.informer[gvr]
		if !ok || !ti.informer.HasSynced() {
			return false
		}
	}
	return true
}

// matchingTriggers lists, from the caches, the triggers the policy matches
// now and has admitted: every match with generateExisting, otherwise those
// created since the policy's activation or admitted by an event.
func (c *Controller) matchingTriggers(cp *compiledPolicy) ([]trigger, error) {
	key := keyOf(cp.policy)
	generateExisting := cp.policy.PolicySpec().GenerateExisting()
	var out []trigger
	var errs []error
	for _, gvr := range cp.triggers {
		c.mu.RLock()
		ti := c.informer[gvr]
		c.mu.RUnlock()
		for _, obj := range ti.informer.GetStore().List() {
			u := obj.(*unstructured.Unstructured)
			if cp.policy.IsNamespaced() && u.GetNamespace() != cp.policy.GetNamespace() {
				continue
			}
			admitted := generateExisting ||
				!u.GetCreationTimestamp().Time.Before(cp.activated) ||
				c.admitted.admitted(key, u.GetUID())
			if !admitted {
				continue
			}
			ok, err := c.matcher.matches(cp.criteria.state, gvr, admission.Create, u)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: match: %w", u.GetKind(), objectRef(u), err))
				continue
			}
			if ok {
				out = append(out, trigger{gvr: gvr, object: u})
			}
		}
	}
	return out, errors.Join(errs...)
}

// desired evaluates the policy for every trigger and labels each object with
// its origin. It also counts the triggers whose matchConditions held. A
// trigger that fails to evaluate is reported and skipped; the others still
// count.
func (c *Controller) desired(ctx context.Context, cp *compiledPolicy, triggers []trigger, reader celenv.Reader) ([]*unstructured.Unstructured, int, error) {
	var out []*unstructured.Unstructured
	var errs []error
	matched := 0
	for _, t := range triggers {
		objs, ok, err := c.evaluate(ctx, cp, t, reader)
		if err != nil {
			errs = append(errs, fmt.Errorf("trigger %s %s: %w", t.object.GetKind(), objectRef(t.object), err))
			continue
		}
		if ok {
			matched++
		}
		out = append(out, objs...)
	}
	return out, matched, errors.Join(errs...)
}

// evaluate runs the policy's program for one trigger, replayed as a CREATE.
func (c *Controller) evaluate(ctx context.Context, cp *compiledPolicy, t trigger, reader celenv.Reader) ([]*unstructured.Unstructured, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, evaluationTimeout)
	defer cancel()
	u := t.object
	in := celenv.Input{
		Object: u.DeepCopy().Object,
		Request: celenv.Request{
			UID:       string(u.GetUID()),
			Operation: string(admission.Create),
			Name:      u.GetName(),
			Namespace: u.GetNamespace(),
			Kind:      u.GroupVersionKind(),
			Resource:  t.gvr,
		},
		Scopes: scopes{c.mapper},
		Reader: reader,
	}
	if ns := u.GetNamespace(); ns != "" {
		if nsObj, err := c.namespaces.Get(ns); err == nil {
			in.NamespaceObject, err = toUnstructured(nsObj, corev1.SchemeGroupVersion.WithKind("Namespace"))
			if err != nil {
				return nil, false, err
			}
		}
	}
	res, err := cp.program.Evaluate(ctx, in)
	if err != nil || !res.Matched {
		return nil, false, err
	}
	return Label(cp.policy, u, res.Objects), true, nil
}

// Label returns the generated objects with the labels that tie each to its
// policy, its trigger and, for clones, its source.
func Label(policy apiv1.Policy, trigger *unstructured.Unstructured, generated []celenv.Generated) []*unstructured.Unstructured {
	origin := inventory.Origin{
		PolicyName: policy.GetName(),
		Trigger: inventory.ObjectRef{
			GVK: trigger.GroupVersionKind(), Namespace: trigger.GetNamespace(), Name: trigger.GetName(), UID: trigger.GetUID(),
		},
	}
	if policy.IsNamespaced() {
		origin.PolicyNamespace = policy.GetNamespace()
	}
	out := make([]*unstructured.Unstructured, 0, len(generated))
	for _, g := range generated {
		o := origin
		if src := g.ClonedFrom; src != nil {
			o.Source = &inventory.ObjectRef{
				GVK:       schema.FromAPIVersionAndKind(src.APIVersion, src.Kind),
				Namespace: src.Namespace, Name: src.Name, UID: types.UID(src.UID),
			}
		}
		inventory.Label(g.Object, o)
		out = append(out, g.Object)
	}
	return out
}

func objectRef(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// scopes answers celenv's question, namespaced or not, from the REST mapper.
type scopes struct{ mapper meta.RESTMapper }

func (s scopes) IsNamespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}
