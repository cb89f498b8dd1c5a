package celenv

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// unsupportedVariable is a Kyverno library Sprout does not provide: a variable
// and the functions Kyverno declares on it, with their argument counts.
type unsupportedVariable struct {
	name      string
	typ       *cel.Type
	functions []unsupportedFunction
}

// unsupportedFunction is a function Kyverno declares on an unsupported variable.
type unsupportedFunction struct {
	name    string
	arities []int // argument counts, the receiver excluded
	chained bool  // returns the variable's type, as http.Client does
}

// unsupportedVariables reach outside the cluster or into Kyverno's own state.
// Sprout declares them, with any argument types, only to reject them at
// compile time with a message that names them; without the declarations a
// policy using them would fail with "undeclared reference".
var unsupportedVariables = []unsupportedVariable{
	{name: "http", typ: cel.OpaqueType("http.Context"), functions: []unsupportedFunction{
		{name: "Get", arities: []int{1, 2}},
		{name: "Post", arities: []int{2, 3}},
		{name: "Put", arities: []int{2, 3}},
		{name: "Client", arities: []int{1}, chained: true},
	}},
	{name: "globalContext", typ: cel.OpaqueType("globalContext.Context"), functions: []unsupportedFunction{
		{name: "Get", arities: []int{1, 2}},
	}},
	{name: "image", typ: cel.OpaqueType("image.Context"), functions: []unsupportedFunction{
		{name: "GetMetadata", arities: []int{1}},
	}},
}

// unsupportedLibrary declares unsupportedVariables, under both Kyverno
// spellings of each function (Get and get), and the validator that rejects
// every use of them.
func unsupportedLibrary() cel.EnvOption {
	opts := []cel.EnvOption{cel.ASTValidators(unsupportedValidator{})}
	for _, v := range unsupportedVariables {
		opts = append(opts, cel.Variable(v.name, v.typ))
		for _, fn := range v.functions {
			result := cel.DynType
			if fn.chained {
				result = v.typ
			}
			for _, name := range []string{fn.name, strings.ToLower(fn.name[:1]) + fn.name[1:]} {
				var overloads []cel.FunctionOpt
				for _, n := range fn.arities {
					args := []*cel.Type{v.typ}
					for range n {
						args = append(args, cel.DynType)
					}
					overloads = append(overloads, cel.MemberOverload(fmt.Sprintf("%s_%s_%d", v.name, name, n), args, result,
						cel.FunctionBinding(notSupported(v.name+"."+name))))
				}
				opts = append(opts, cel.Function(name, overloads...))
			}
		}
	}
	return cel.Lib(utilityLibrary{compile: opts})
}

// notSupported is the binding of a rejected function: never reached, since
// the validator fails every expression that calls one.
func notSupported(name string) func(...ref.Val) ref.Val {
	return func(...ref.Val) ref.Val {
		return types.NewErr("%s is not supported by Sprout (yet)", name)
	}
}

// unsupportedValidator reports the use of unsupported variables: each
// function called on one by its name, and a variable used in any other way
// (passed around, bound to another name) by its own name, once.
type unsupportedValidator struct{}

func (unsupportedValidator) Name() string { return "sprout.unsupportedLibraries" }

func (unsupportedValidator) Validate(_ *cel.Env, _ cel.ValidatorConfig, a *ast.AST, iss *cel.Issues) {
	root := ast.NavigateAST(a)
	reported := map[string]bool{} // variables named in an error
	for _, call := range ast.MatchDescendants(root, ast.KindMatcher(ast.CallKind)) {
		c := call.AsCall()
		if !c.IsMemberFunction() || c.Target().Kind() != ast.IdentKind {
			continue
		}
		if v, ok := unsupportedOfType(a.GetType(c.Target().ID())); ok {
			iss.ReportErrorAtID(call.ID(), "%s.%s is not supported by Sprout (yet)", v.name, c.FunctionName())
			reported[v.name] = true
		}
	}
	for _, id := range ast.MatchDescendants(root, ast.KindMatcher(ast.IdentKind)) {
		if v, ok := unsupportedOfType(id.Type()); ok && !reported[v.name] {
			iss.ReportErrorAtID(id.ID(), "%s is not supported by Sprout (yet)", v.name)
			reported[v.name] = true
		}
	}
}

// unsupportedOfType finds the variable by type rather than by name, so that
// a local variable that shadows http is left alone and an alias of http
// (cel.bind(h, http, h.Get(u))) is caught.
func unsupportedOfType(t *cel.Type) (unsupportedVariable, bool) {
	for _, v := range unsupportedVariables {
		if t != nil && t.IsExactType(v.typ) {
			return v, true
		}
	}
	return unsupportedVariable{}, false
}
