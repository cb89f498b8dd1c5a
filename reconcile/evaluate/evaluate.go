package evaluate

import (
	"context"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// Config is what an Evaluator needs from the core and the options.
type Config struct {
	// Log receives what an evaluation has to say beside its result.
	Log *slog.Logger
	// Timeout bounds one evaluation by the wall clock; 0 is
	// celenv.DefaultEvaluationTimeout.
	Timeout time.Duration
	// HTTP makes the policies' http calls, to the hosts it allows; nil
	// allows none. Each Reader is one round of its cache.
	HTTP *celenv.HTTP
	// GlobalContext serves globalContext.Get; nil finds no entry.
	GlobalContext GlobalContext
	// Exceptions applies the sources' PolicyExceptions; off, none is read.
	// ExceptionNamespace is the only namespace whose exceptions count; ""
	// or "*" means every one.
	Exceptions         bool
	ExceptionNamespace string
	// Namespaces are the cached Namespaces, for the matcher's selectors
	// and the evaluations' namespaceObject; Client asks the API server for
	// one not cached yet.
	Namespaces listersv1.NamespaceLister
	Client     kubernetes.Interface
	// Kinds maps the kinds expressions name to their resources.
	Kinds Mapper
	// Live serves the cached objects a kept evaluation settled.
	Live inventory.Live
	// Proof signs the origin of every object generated (cluster.ProofKey);
	// nil signs none.
	Proof *cluster.ProofKey
	// LastUpdate returns the state of a trigger of cp before its last
	// UPDATE, or nil.
	LastUpdate func(cp *policy.Compiled, gvr schema.GroupVersionResource, uid types.UID) *cluster.Object
	// Cache returns the synced cache of gvr that serves reads of policies
	// confined to scope ("" for none), starting its informer if needed.
	Cache func(ctx context.Context, scope string, gvr schema.GroupVersionResource) (cache.Store, error)
	// Requeue queues a policy, once an exception that named it expired.
	Requeue func(policy.Key)
	// Cores shares the processors among tenants' evaluations; nil holds
	// none back.
	Cores *Cores
}

// Mapper maps a kind to its resource (kinds.Kinds).
type Mapper interface {
	Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error)
}

// Evaluator evaluates compiled policies for their triggers against the
// informer caches. It keeps the sources' PolicyExceptions and what every
// evaluation shares: the Namespaces converted for namespaceObject and the
// matcher.
type Evaluator struct {
	cfg     Config
	matcher *Matcher
	// namespaceObjects converts the Namespaces of triggers for evaluations.
	namespaceObjects celenv.NamespaceObjects
	exceptions       exceptionStore
}

// New returns an Evaluator over what cfg serves.
func New(cfg Config) *Evaluator {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Evaluator{cfg: cfg, matcher: NewMatcher(cfg.Namespaces, cfg.Client)}
}

// Namespace returns the cached Namespace of that name; nil for "" or one
// not cached.
func (e *Evaluator) Namespace(name string) *corev1.Namespace {
	if name == "" {
		return nil
	}
	obj, _ := e.cfg.Namespaces.Get(name)
	return obj
}

// Match reports whether crit selects the trigger u, of kind gvk, in an
// admission request for op (Matcher.MatchesCriteria).
func (e *Evaluator) Match(crit policy.MatchCriteria, gvr schema.GroupVersionResource, op admission.Operation, gvk schema.GroupVersionKind, u Selectable) (bool, error) {
	return e.matcher.MatchesCriteria(crit, gvr, op, gvk, u)
}

// Evaluate runs the policy's program for one trigger, replayed as its last
// event, reading through r. A result kept from an earlier sync for the
// same inputs is returned as it is, and kept says so; epoch is the
// policy's count of downstream events now.
func (e *Evaluator) Evaluate(ctx context.Context, cp *policy.Compiled, t policy.Trigger, r *Reader, epoch uint64) (ev policy.Evaluation, m *policy.Memo, kept bool, err error) {
	op, oldObject := e.replayed(cp, t)
	m = t.Memo
	if m == nil && !t.Deleted {
		m = cp.Evaluations.Of(t.Object)
	}
	var nsObject *corev1.Namespace
	exceptions := e.exceptionsFor(r.exceptions, policy.KeyOf(cp.Policy), cp.Policy)
	if m != nil {
		nsObject = e.Namespace(m.Namespace)
		// A tombstone has no memo: it is evaluated once, never kept. A
		// settled evaluation whose objects changed in the cache is
		// evaluated again, so that they are compared in full.
		if ev := m.Evaluated; ev != nil && ev.Old == oldObject && ev.Namespace == nsObject && ev.Op == op && ev.Exceptions == exceptions && e.stillHolds(ev, epoch) {
			return *ev, m, true, nil
		}
	} else {
		nsObject = e.Namespace(t.Object.GetNamespace())
	}

	// Decoded for this evaluation alone: a program only reads its inputs,
	// and what it generates is made of new maps (celenv's conversion of its
	// values), never of theirs.
	u := t.Object.Decode()
	event := celenv.Event{Operation: string(op), Object: u, Resource: t.GVR, Namespace: nsObject, Namespaces: &e.namespaceObjects}
	if oldObject != nil {
		event.OldObject = oldObject.Decode()
	}
	in, err := celenv.NewInput(event)
	if err != nil {
		return policy.Evaluation{}, m, false, err
	}
	in.Scopes, in.Reader, in.Timeout, in.HTTP = scopes{e.cfg.Kinds}, r, e.cfg.Timeout, r.web
	in.GlobalContext = r.globalContext()
	in.Exceptions = exceptions.ExceptionList()
	release, err := e.cfg.Cores.Acquire(ctx, policy.KeyOf(cp.Policy).Namespace)
	if err != nil {
		return policy.Evaluation{}, m, false, err
	}
	res, err := cp.Program.Evaluate(ctx, in)
	release()
	if err != nil {
		return policy.Evaluation{}, m, false, err
	}
	ev = policy.Evaluation{Old: oldObject, Namespace: nsObject, Op: op, Objects: e.labelled(cp, t, u, res), Matched: res.Matched,
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
func (e *Evaluator) replayed(cp *policy.Compiled, t policy.Trigger) (admission.Operation, *cluster.Object) {
	switch {
	case t.Deleted:
		return admission.Delete, nil
	case cp.Program.ReadsEvent():
		// The trigger's last event was an UPDATE: replay it with the state
		// before it, as a webhook would have seen it.
		if prev := e.cfg.LastUpdate(cp, t.GVR, t.Object.GetUID()); prev != nil {
			return admission.Update, prev
		}
	}
	return admission.Create, nil
}

// labelled returns what an evaluation of trigger u generated, labelled with
// its origin and stamped final: kept results are shared by later syncs.
func (e *Evaluator) labelled(cp *policy.Compiled, t policy.Trigger, u *unstructured.Unstructured, res celenv.Result) []*unstructured.Unstructured {
	if !res.Matched {
		return nil
	}
	if len(res.MissingSources) > 0 {
		e.cfg.Log.Info("clone sources not found", "policy", policy.KeyOf(cp.Policy).String(),
			"trigger", u.GetKind()+" "+objectRef(u), "sources", res.MissingSources)
	}
	objs := Label(cp.Policy, u, res.Objects)
	chain := strings.Join(t.Object.Chain(), ",")
	for _, o := range objs {
		if t.Deleted {
			inventory.MarkGeneratedOnDelete(o)
		}
		if chain != "" {
			// Generated from what Sprout generated: the chain goes on, for
			// the next policy to be bounded by (reconcile/chain.go).
			inventory.MarkChain(o, chain)
		}
		// Stamped first: the digest leaves the proof out, and one made
		// before there is a proof copies no annotations.
		inventory.Stamp(o)
		e.cfg.Proof.Sign(o)
	}
	return objs
}

// stillHolds reports whether the objects a kept evaluation settled, if any,
// are still in the cache as settled, at the policy's downstream event
// count epoch.
func (e *Evaluator) stillHolds(ev *policy.Evaluation, epoch uint64) bool {
	switch {
	case ev.Settled.Len() == 0, ev.SettledAt == epoch && !ev.Awaiting:
		return true
	case ev.Settled.Holds(e.cfg.Live):
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

// objectRef names an object as kubectl does: namespace/name, or name.
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
type scopes struct{ kinds Mapper }

func (s scopes) IsNamespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := s.kinds.Mapping(gvk)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}
