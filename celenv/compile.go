package celenv

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// Program is a policy compiled once for many evaluations. It is immutable and
// safe for concurrent use. A policy that does not compile still yields a
// Program: Err says what is wrong, with field paths, and Evaluate refuses.
type Program struct {
	policy          string // Kind/name or Kind/namespace/name, for errors
	namespace       string // set for namespaced policies: all they may touch
	matchConditions []expression
	variables       []expression
	generate        []generateEntry
	// audit are the auditAnnotations, evaluated into Result.AuditAnnotations.
	audit []expression
	err   error
	// readsEvent is set when an expression reads oldObject or request: the
	// event a trigger was last seen in matters, not only its state.
	readsEvent bool
	// readsNamespace is set when an expression reads namespaceObject: a
	// change to a trigger's Namespace other than its labels matters.
	readsNamespace bool
}

// ReadsEvent reports whether the policy reads oldObject or request, so the
// caller knows whether to keep the previous state of updated triggers.
func (p *Program) ReadsEvent() bool { return p.readsEvent }

// ReadsNamespace reports whether the policy reads namespaceObject: whether
// a change to a trigger's Namespace may change what it generates even when
// the Namespace's labels, which its namespaceSelector reads, stay.
func (p *Program) ReadsNamespace() bool { return p.readsNamespace }

// generateEntry is one compiled generate[] entry: it adds what it generates
// to gen.
type generateEntry interface {
	run(ctx context.Context, activation map[string]any, gen *generation) error
}

// expression is one compiled CEL expression and where it came from.
type expression struct {
	name    string
	path    *field.Path
	program cel.Program
}

// Err reports why the policy did not compile, naming the policy and each
// failing field path (spec.variables[1].expression: …), or nil.
func (p *Program) Err() error { return p.err }

// Policy names the policy the program was compiled from, as Kind/[namespace/]name.
func (p *Program) Policy() string { return p.policy }

var identifier = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Compile compiles every expression of the policy: matchConditions,
// variables (each may use the ones before it) and generate entries. It never
// fails; compile errors are kept on the Program.
func Compile(policy apiv1.Policy) *Program {
	p := &Program{policy: PolicyRef(policy)}
	if policy.IsNamespaced() {
		p.namespace = policy.GetNamespace()
	}
	cluster, namespaced, err := environments()
	if err != nil {
		p.err = fmt.Errorf("%s: CEL environment: %w", p.policy, err)
		return p
	}
	env := cluster
	if policy.IsNamespaced() {
		env = namespaced
	}

	spec := policy.PolicySpec()
	root := field.NewPath("spec")
	b := &budget{}
	var errs field.ErrorList
	if spec.MatchConstraints == nil || len(spec.MatchConstraints.ResourceRules) == 0 {
		errs = append(errs, field.Required(root.Child("matchConstraints", "resourceRules"), "a policy needs at least one resource rule to know its triggers"))
	}
	for i, mc := range spec.MatchConditions {
		path := root.Child("matchConditions").Index(i).Child("expression")
		// As in Kyverno and admission policies, matchConditions run before
		// variables exist: they cannot use them.
		e, err := b.compile(env, mc.Name, mc.Expression, path, cel.BoolType, nil)
		errs = append(errs, err...)
		p.matchConditions = append(p.matchConditions, e)
	}
	seen := map[string]bool{}
	var defined []string
	for i, v := range spec.Variables {
		path := root.Child("variables").Index(i)
		switch {
		case !identifier.MatchString(v.Name):
			errs = append(errs, field.Invalid(path.Child("name"), v.Name, "must be a CEL identifier"))
		case seen[v.Name]:
			errs = append(errs, field.Duplicate(path.Child("name"), v.Name))
		}
		seen[v.Name] = true
		e, err := b.compile(env, v.Name, v.Expression, path.Child("expression"), nil, defined)
		errs = append(errs, err...)
		p.variables = append(p.variables, e)
		defined = append(defined, v.Name)
	}
	if len(spec.Generation) == 0 {
		errs = append(errs, field.Required(root.Child("generate"), "a policy needs at least one generate entry"))
	}
	for i, g := range spec.Generation {
		path := root.Child("generate").Index(i)
		switch {
		case g.Expression != "" && g.Template != nil:
			errs = append(errs, field.Invalid(path, field.OmitValueType{}, "set expression or template, not both"))
		case g.Template != nil:
			t, err := compileTemplate(env, b, g.Template, path.Child("template"), defined)
			errs = append(errs, err...)
			p.generate = append(p.generate, t)
		default:
			e, err := b.compile(env, g.Name, g.Expression, path.Child("expression"), generateResult, defined)
			errs = append(errs, err...)
			p.generate = append(p.generate, generateExpression{e})
		}
	}
	audit, auditErrs := compileAuditAnnotations(env, b, spec, defined)
	p.audit, errs = audit, append(errs, auditErrs...)
	p.readsEvent = b.reads(varOldObject, varRequest)
	p.readsNamespace = b.reads(varNamespaceObject)
	if len(errs) > 0 {
		p.err = fmt.Errorf("%s: %w", p.policy, errs.ToAggregate())
	}
	return p
}

// Bounds on what compiling one policy may cost. Compiling takes time for
// every expression and every byte of its source, and a policy is compiled
// again at each change, for each revision of its source and by every
// `sprout render`: without them a valid policy of 1 MiB, ten thousand
// template placeholders, would compile for seconds (docs/performance.md).
const (
	// MaxExpressionsPerPolicy bounds the expressions of one policy:
	// matchConditions, variables, generate expressions and template
	// placeholders together.
	MaxExpressionsPerPolicy = 256
	// MaxExpressionBytesPerPolicy bounds the source of those expressions,
	// all together (one expression alone may have 100,000 characters, CEL's
	// own limit).
	MaxExpressionBytesPerPolicy = 128 << 10
)

// budget counts the expressions of one policy as they are compiled. Past a
// bound it reports the expression where it ran out, once, and compiles
// nothing more: the policy is rejected, and what it would have cost is not
// spent.
type budget struct {
	expressions, bytes int
	spent              bool
	// compiled are the sources compiled, as CEL read them: a template's
	// placeholders after YAML decoded their escapes.
	compiled []string
}

// reads reports whether an expression compiled may read one of the
// variables vars. It looks at the text: a false positive only keeps more
// state, or syncs more; the text is what CEL compiled, so a name is not
// missed behind an escape of the source's YAML.
func (b *budget) reads(vars ...string) bool {
	return slices.ContainsFunc(b.compiled, func(t string) bool {
		return slices.ContainsFunc(vars, func(v string) bool { return strings.Contains(t, v) })
	})
}

// compile compiles one expression (compileExpression) if the budget allows.
func (b *budget) compile(env *cel.Env, name, src string, path *field.Path, want *cel.Type, defined []string) (expression, field.ErrorList) {
	if b.spent {
		return expression{name: name, path: path}, nil
	}
	b.expressions++
	b.bytes += len(src)
	var over string
	switch {
	case b.expressions > MaxExpressionsPerPolicy:
		over = fmt.Sprintf("a policy may have at most %d expressions (matchConditions, variables, generate entries and template placeholders together); this is one more",
			MaxExpressionsPerPolicy)
	case b.bytes > MaxExpressionBytesPerPolicy:
		over = fmt.Sprintf("a policy's expressions may have at most %d bytes together; with this one they have %d",
			MaxExpressionBytesPerPolicy, b.bytes)
	default:
		b.compiled = append(b.compiled, src)
		return compileExpression(env, name, src, path, want, defined)
	}
	b.spent = true
	return expression{name: name, path: path}, field.ErrorList{field.Forbidden(path, over)}
}

// compileExpression parses, type-checks and plans one expression. want, when
// set, is the result type the expression must have (dyn is accepted);
// defined are the variables it may read.
func compileExpression(env *cel.Env, name, src string, path *field.Path, want *cel.Type, defined []string) (expression, field.ErrorList) {
	e := expression{name: name, path: path}
	if src == "" {
		return e, field.ErrorList{field.Required(path, "")}
	}
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return e, field.ErrorList{field.Invalid(path, field.OmitValueType{}, iss.Err().Error())}
	}
	if err := checkVariableRefs(ast, defined); err != nil {
		return e, field.ErrorList{field.Invalid(path, field.OmitValueType{}, err.Error())}
	}
	if want != nil && !resultIs(ast.OutputType(), want) {
		what := want.String()
		if want == generateResult {
			what = "bool or a list of bools"
		}
		return e, field.ErrorList{field.Invalid(path, field.OmitValueType{},
			fmt.Sprintf("must evaluate to %s, not %s", what, ast.OutputType()))}
	}
	prog, err := programOf(env, src, func() (cel.Program, error) { return env.Program(ast, programOptions(env)...) })
	if err != nil {
		return e, field.ErrorList{field.Invalid(path, field.OmitValueType{}, err.Error())}
	}
	e.program = prog
	return e, nil
}

// generateResult marks the result type of a generate expression: a bool, or
// a list of them (nested as deep as the .map() calls that made it), as in
// variables.namespaces.map(ns, generator.Apply(ns, ...)).
// It is a marker for compileExpression, never a type of any value.
var generateResult = cel.OpaqueType("sprout.generateResult")

// generateExpression is a generate entry written as a CEL expression: it
// generates through generator.Apply and returns a bool or a list of bools.
type generateExpression struct{ expression }

func (g generateExpression) run(ctx context.Context, activation map[string]any, gen *generation) error {
	out, err := g.eval(ctx, activation)
	if err != nil {
		return err
	}
	// The result is walked like any value: a list of lists of bools that
	// share their elements may be far larger than it looks.
	ok, err := allBools(&gen.budget, out)
	if err != nil {
		return interrupted(cause(ctx, activation), g.path, err)
	}
	if !ok {
		return fmt.Errorf("%s: must evaluate to bool or a list of bools, got %s", g.path, out.Type().TypeName())
	}
	return nil
}

// resultIs reports whether an expression of type t can yield want: exactly,
// through dyn, or, for generate expressions, as a (nested) list of it.
func resultIs(t, want *cel.Type) bool {
	if t.IsExactType(cel.DynType) {
		return true
	}
	if want != generateResult {
		return t.IsExactType(want)
	}
	if t.IsExactType(cel.BoolType) {
		return true
	}
	return t.Kind() == types.ListKind && len(t.Parameters()) == 1 && resultIs(t.Parameters()[0], want)
}

// PolicyRef names a policy as Kind/name or Kind/namespace/name.
func PolicyRef(p apiv1.Policy) string {
	if p.IsNamespaced() {
		return apiv1.NamespacedGeneratingPolicyKind + "/" + p.GetNamespace() + "/" + p.GetName()
	}
	return apiv1.GeneratingPolicyKind + "/" + p.GetName()
}

// ErrNotCompiled is returned by Evaluate on a Program whose policy did not compile.
var ErrNotCompiled = errors.New("policy did not compile")
