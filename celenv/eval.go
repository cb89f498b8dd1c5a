package celenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/lazy"

	"github.com/sprout-gitops/sprout/celenv/lib"
)

// Input is one trigger as a policy sees it: the admission event a webhook
// would have received for it. Evaluate only reads the objects: they may be
// a cache's, shared, and what it generates shares no map with them.
type Input struct {
	// Object is the trigger's current state; nil for a DELETE.
	Object map[string]any
	// OldObject is the previous state for an UPDATE, the last state for a DELETE.
	OldObject map[string]any
	// Request describes the event.
	Request Request
	// NamespaceObject is the trigger's Namespace; nil for cluster-scoped triggers.
	NamespaceObject map[string]any
	// Scopes tells namespaced kinds from cluster-scoped ones, so that
	// generator.Apply gives only the former a namespace. Nil treats every
	// kind as namespaced.
	Scopes Scopes
	// Reader serves resource.Get and resource.List. Nil makes every read fail.
	Reader Reader
	// Now is the time time.now() returns; zero means the wall clock.
	Now time.Time
	// Timeout bounds the whole evaluation, reads included, by the wall
	// clock; zero means DefaultEvaluationTimeout.
	Timeout time.Duration
	// HTTP makes http.Get, Post and Put, and caches them for its round;
	// nil makes every call fail, as no host is allowed.
	HTTP *HTTPRound
	// GlobalContext serves globalContext.Get; nil finds no entry.
	GlobalContext GlobalContext
	// Exceptions are the PolicyExceptions that name the policy: a trigger
	// one of them excepts generates nothing (Result.Excepted).
	Exceptions []*Exception
}

// DefaultEvaluationTimeout is how long one evaluation of a policy for one
// trigger may take. The cost limit bounds each expression by the work CEL
// can estimate; this bounds what it cannot: functions charged less than
// they cost, many expressions each under the limit, reads that wait.
const DefaultEvaluationTimeout = 5 * time.Second

// Scopes reports whether a kind is namespaced. The controller answers from
// the API server's REST mapping; render answers from built-in knowledge.
type Scopes interface {
	IsNamespaced(gvk schema.GroupVersionKind) (bool, error)
}

// Request is the admission request an event is replayed as. UserInfo is
// always empty: a watch has no requester.
type Request struct {
	UID       string
	Operation string
	Name      string
	Namespace string
	Kind      schema.GroupVersionKind
	Resource  schema.GroupVersionResource
}

func (r Request) value() map[string]any {
	return map[string]any{
		"uid":       r.UID,
		"operation": r.Operation,
		"name":      r.Name,
		"namespace": r.Namespace,
		"kind":      map[string]any{"group": r.Kind.Group, "version": r.Kind.Version, "kind": r.Kind.Kind},
		"resource":  map[string]any{"group": r.Resource.Group, "version": r.Resource.Version, "resource": r.Resource.Resource},
		"userInfo":  map[string]any{},
	}
}

// Result is what a policy wants for one trigger.
type Result struct {
	// Matched is false when a matchCondition is false: the policy skips the trigger.
	Matched bool
	// Objects are the desired objects, in the order they were generated; an
	// object generated twice appears once, as generated last.
	Objects []Generated
	// MissingSources names the objects resource.Get did not find. A generate
	// entry that failed for want of one generates nothing, without error:
	// the clones of a deleted source are no longer desired, so a
	// synchronizing policy prunes them, as Kyverno deletes them.
	MissingSources []string
	// AuditAnnotations are the policy's auditAnnotations evaluated for a
	// trigger it matched, by key; empty values left out.
	AuditAnnotations map[string]string
	// Excepted names the exceptions (namespace/name) that except the
	// trigger; it is then neither matched nor evaluated, as in Kyverno.
	Excepted []string
	// ExceptedResult is how the excepted trigger is reported: the
	// ReportResult of the exception that decides it (skip or pass).
	ExceptedResult string
	// Reproducible is set when the result depends on the Input's objects
	// and request alone: the evaluation read no other object and not the
	// clock, so the same input gives the same result again, and a caller
	// may keep it instead of evaluating again.
	Reproducible bool
}

// variablesType is the type of the variables value: a map of any value by
// name.
var variablesType = types.NewMapType(types.StringType, types.DynType)

// timeLimitExceeded is the cause of an evaluation's context past its time
// limit. It is made for every evaluation, so its message is only formatted
// when read.
type timeLimitExceeded time.Duration

func (t timeLimitExceeded) Error() string {
	return fmt.Sprintf("evaluation took longer than its time limit of %s", time.Duration(t))
}

// Evaluate runs the policy against one trigger: matchConditions first, then
// every generate entry, with variables evaluated lazily on first use. Errors
// name the failing expression's field path.
func (p *Program) Evaluate(ctx context.Context, in Input) (Result, error) {
	if p.err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrNotCompiled, p.err)
	}
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = DefaultEvaluationTimeout
	}
	// CEL checks the context every 100 steps of a comprehension
	// (InterruptCheckFrequency), reads check it too, and so does every walk
	// over a value (evaluationBudget.visit): what one call does between
	// comprehension steps.
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, timeLimitExceeded(timeout))
	defer cancel()
	rd := &reads{ctx: ctx, reader: in.Reader, namespace: p.namespace}
	gen := &generation{namespace: p.namespace, reads: rd, scopes: in.Scopes, budget: evaluationBudget{cancel: cancel, done: ctx.Done()}}
	libs := lib.Bind(ctx, in.Now, in.HTTP, in.GlobalContext)
	reproducible := func() bool { return !rd.any && !libs.Used() }
	vars := lazy.NewMapValue(variablesType)
	// Sized for the libraries' variables too: a map grown after it is made
	// costs an allocation in every evaluation.
	activation := make(map[string]any, 10)
	libs.AddTo(activation)
	activation[varObject] = orNull(in.Object)
	activation[varOldObject] = orNull(in.OldObject)
	// Made when an expression first reads it, as a variable is: most
	// policies never do, and its maps cost every evaluation otherwise.
	req := in.Request
	activation[varRequest] = func() any { return req.value() }
	activation[varNamespaceObject] = orNull(in.NamespaceObject)
	activation[varVariables] = vars
	activation[varGenerator] = gen
	activation[varResource] = rd
	for _, v := range p.variables {
		v := v
		vars.Append(v.name, func(*lazy.MapValue) ref.Val {
			out, err := v.eval(ctx, activation)
			if err != nil {
				return types.WrapErr(err)
			}
			return out
		})
	}

	if names, result, err := excepted(ctx, in.Exceptions, activation); err != nil || len(names) > 0 {
		return Result{Excepted: names, ExceptedResult: result, Reproducible: reproducible()}, err
	}
	if matched, err := p.match(ctx, activation); err != nil || !matched {
		return Result{Matched: false, Reproducible: reproducible()}, err
	}
	var missing []string
	for _, g := range p.generate {
		before := len(gen.objects)
		rd.missing = nil
		if err := g.run(ctx, activation, gen); err != nil {
			// Only a failure that is the missing source's own: one absorbed
			// earlier (resource.Get(...) || true) excuses no other error.
			if len(rd.missing) == 0 || !strings.Contains(err.Error(), "not found") {
				return Result{}, err
			}
			// A deleted clone source: this entry generates nothing, the
			// others still count.
			gen.truncate(before)
			missing = append(missing, rd.missing...)
		}
	}
	audit, err := p.auditAnnotations(ctx, activation)
	if err != nil {
		return Result{}, err
	}
	return Result{Matched: true, Objects: gen.objects, MissingSources: missing, AuditAnnotations: audit, Reproducible: reproducible()}, nil
}

// match runs the matchConditions as admission does: a condition that is
// false skips the trigger even when another failed, and the failures count
// only when no condition is false. The controller stopping is the
// exception: nothing after it is trusted.
func (p *Program) match(ctx context.Context, activation map[string]any) (bool, error) {
	return matchAll(ctx, p.matchConditions, activation)
}

// matchAll runs conditions as admission runs matchConditions.
func matchAll(ctx context.Context, conditions []expression, activation map[string]any) (bool, error) {
	var errs []error
	for _, mc := range conditions {
		out, err := mc.eval(ctx, activation)
		switch {
		case err != nil && ctx.Err() != nil:
			return false, err
		case err != nil:
			errs = append(errs, err)
		case out != types.True:
			return false, nil
		}
	}
	return len(errs) == 0, errors.Join(errs...)
}

// eval runs one expression, charges its cost to the evaluation's budget and
// wraps any error with its field path. Once the budget is spent, every
// expression fails, even one that absorbed the error of another
// (variables.big || true).
func (e expression) eval(ctx context.Context, activation map[string]any) (ref.Val, error) {
	out, det, err := e.program.ContextEval(ctx, activation)
	if det != nil && det.ActualCost() != nil {
		charge(activation, *det.ActualCost())
	}
	switch {
	case ctx.Err() != nil:
		return nil, interrupted(cause(ctx, activation), e.path, err)
	case err == nil:
		return out, nil
	}
	// Said once, by the expression that ran out, not by each that read it.
	if cancelled, ok := err.(interpreter.EvalCancelledError); ok && cancelled.Cause == interpreter.CostLimitExceeded {
		return nil, fmt.Errorf("%s: %w (the limit of one expression is %d)", e.path, err, PerCallCostLimit)
	}
	return nil, fmt.Errorf("%s: %w", e.path, err)
}

// interruption is why an evaluation stopped before its end: the time
// limit, or the controller stopping. Path is the innermost expression
// that was under way.
type interruption struct {
	path  *field.Path
	cause error
}

func (i *interruption) Error() string { return i.path.String() + ": " + i.cause.Error() }
func (i *interruption) Unwrap() error { return i.cause }

// interrupted reports an expression stopped by the end of its evaluation, for
// cause, as the path
// to the innermost expression under way and the cause, said once
// ("spec.generate[0].expression: spec.variables[1].expression: evaluation
// took longer than …"): cel-go repeats "operation interrupted" and the cause
// at each expression an interrupted variable is read from.
func interrupted(cause error, path *field.Path, err error) error {
	var inner *interruption
	if errors.As(err, &inner) {
		return fmt.Errorf("%s: %w", path, inner)
	}
	return &interruption{path: path, cause: cause}
}

func orNull(m map[string]any) any {
	if m == nil {
		return types.NullValue
	}
	return m
}
