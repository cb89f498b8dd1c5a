package reconcile

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// evaluate runs the policy's program for one trigger, replayed as its last
// event (replayed). A result kept from an earlier sync for the same inputs
// is returned as it is, and kept says so.
func (c *Controller) evaluate(ctx context.Context, cp *policy.Compiled, t policy.Trigger, reader *cacheReader, epoch uint64) (ev policy.Evaluation, m *policy.Memo, kept bool, err error) {
	op, oldObject := c.replayed(cp, t)
	m = t.Memo
	if m == nil && !t.Deleted {
		m = cp.Evaluations.Of(t.Object)
	}
	var nsObject *corev1.Namespace
	exceptions := c.exceptionsFor(policy.KeyOf(cp.Policy), cp.Policy)
	if m != nil {
		nsObject = c.namespaceNamed(m.Namespace)
		// A tombstone has no memo: it is evaluated once, never kept. A
		// settled evaluation whose objects changed in the cache is
		// evaluated again, so that they are compared in full.
		if ev := m.Evaluated; ev != nil && ev.Old == oldObject && ev.Namespace == nsObject && ev.Op == op && ev.Exceptions == exceptions && c.stillHolds(ev, epoch) {
			return *ev, m, true, nil
		}
	} else {
		nsObject = c.namespaceNamed(t.Object.GetNamespace())
	}

	// Decoded for this evaluation alone: a program only reads its inputs,
	// and what it generates is made of new maps (celenv's conversion of its
	// values), never of theirs.
	u := t.Object.Decode()
	event := celenv.Event{Operation: string(op), Object: u, Resource: t.GVR, Namespace: nsObject, Namespaces: &c.namespaceObjects}
	if oldObject != nil {
		event.OldObject = oldObject.Decode()
	}
	in, err := celenv.NewInput(event)
	if err != nil {
		return policy.Evaluation{}, m, false, err
	}
	in.Scopes, in.Reader, in.Timeout, in.HTTP = scopes{c}, reader, c.opts.EvaluationTimeout, reader.web
	in.GlobalContext = reader.globalContext()
	in.Exceptions = exceptions.ExceptionList()
	res, err := cp.Program.Evaluate(ctx, in)
	if err != nil {
		return policy.Evaluation{}, m, false, err
	}
	ev = policy.Evaluation{Old: oldObject, Namespace: nsObject, Op: op, Objects: c.labelled(cp, t, u, res), Matched: res.Matched,
		Exceptions: exceptions, Excepted: res.Excepted, ExceptedResult: res.ExceptedResult, Audit: res.AuditAnnotations}
	for _, o := range ev.Objects {
		ev.Kinds = append(ev.Kinds, cluster.KindOf(o))
	}
	if m != nil {
		m.Evaluated = nil
		if res.Reproducible {
			m.Evaluated = &ev
		}
	}
	return ev, m, false, nil
}

// replayed is the event a trigger is evaluated as: a CREATE, an UPDATE with
// the state before it as oldObject (kept for policies that read it), or,
// for a tombstone, a DELETE with the last state as oldObject.
func (c *Controller) replayed(cp *policy.Compiled, t policy.Trigger) (admission.Operation, *cluster.Object) {
	switch {
	case t.Deleted:
		return admission.Delete, nil
	case cp.Program.ReadsEvent():
		// The trigger's last event was an UPDATE: replay it with the state
		// before it, as a webhook would have seen it.
		if prev := c.lastUpdate(c.triggerKeyOf(cp, t.GVR), t.Object.GetUID()); prev != nil {
			return admission.Update, prev
		}
	}
	return admission.Create, nil
}

// labelled returns what an evaluation of trigger u generated, labelled with
// its origin and stamped final: kept results are shared by later syncs.
func (c *Controller) labelled(cp *policy.Compiled, t policy.Trigger, u *unstructured.Unstructured, res celenv.Result) []*unstructured.Unstructured {
	if !res.Matched {
		return nil
	}
	if len(res.MissingSources) > 0 {
		c.log.Info("clone sources not found", "policy", policy.KeyOf(cp.Policy).String(),
			"trigger", u.GetKind()+" "+objectRef(u), "sources", res.MissingSources)
	}
	objs := Label(cp.Policy, u, res.Objects)
	for _, o := range objs {
		if t.Deleted {
			inventory.MarkGeneratedOnDelete(o)
		}
		inventory.Stamp(o)
	}
	return objs
}

// stillHolds reports whether the objects a kept evaluation settled, if any,
// are still in the cache as settled, at the policy's downstream event
// count epoch.
func (c *Controller) stillHolds(ev *policy.Evaluation, epoch uint64) bool {
	switch {
	case ev.Settled.Len() == 0, ev.SettledAt == epoch && !ev.Awaiting:
		return true
	case ev.Settled.Holds(liveObjects{c}):
		// Held at this count: no lookup until the next event, once every
		// object is cached.
		ev.SettledAt, ev.Awaiting = epoch, ev.Settled.Pending()
		return true
	}
	return false
}

// Label returns the generated objects with the labels that tie each to its
// policy, its trigger and, for clones, its source.
func Label(policy apiv1.Policy, trigger *unstructured.Unstructured, generated []celenv.Generated) []*unstructured.Unstructured {
	origin := inventory.Origin{
		Policy:     celenv.PolicyRef(policy),
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

func objectRef(u interface {
	GetNamespace() string
	GetName() string
}) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// scopes answers celenv's question, namespaced or not, from the REST mapper.
type scopes struct{ c *Controller }

func (s scopes) IsNamespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := s.c.restMapping(gvk)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}
