package lib

import (
	"context"
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// GlobalContext serves globalContext.Get: the data Kyverno's
// GlobalContextEntries cache. What it returns is shared and only read.
type GlobalContext interface {
	// Get returns the data of the entry called name, or of its projection
	// when projection is not "". found is false when no entry has the name.
	Get(ctx context.Context, name, projection string) (value any, found bool, err error)
}

// globalContextType is the CEL type of the globalContext variable.
var globalContextType = cel.OpaqueType("globalContext.Context")

const varGlobalContext = "globalContext"

// globalContextReads is the value bound to globalContext for one evaluation.
type globalContextReads struct {
	ctx    context.Context
	source GlobalContext // nil: no entry exists
	used   *bool         // set by the first read: the result is not reproducible
}

// get reads one entry. A missing entry is null, as in Kyverno, so a policy
// written for Kyverno that tests for null keeps working; an entry that has
// no data (its call failed, its resource cannot be listed) is an error
// naming it.
func (g *globalContextReads) get(name, projection string) ref.Val {
	*g.used = true
	if g.source == nil {
		return types.NullValue
	}
	v, found, err := g.source.Get(g.ctx, name, projection)
	switch {
	case err != nil && projection != "":
		return types.NewErr("globalContext.Get(%q, %q): %v", name, projection, err)
	case err != nil:
		return types.NewErr("globalContext.Get(%q): %v", name, err)
	case !found || v == nil:
		return types.NullValue
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

// globalContextLibrary declares Kyverno's globalContext library, under
// Kyverno's spelling and in lower case:
//
//	globalContext.Get(name, projection) -> dyn   // "" for the entry's whole data
//	globalContext.Get(name) -> dyn                // the same as projection ""
func globalContextLibrary() cel.EnvOption {
	get := func(args ...ref.Val) ref.Val {
		projection := ""
		if len(args) == 3 {
			projection = string(args[2].(types.String))
		}
		return args[0].(*globalContextReads).get(string(args[1].(types.String)), projection)
	}
	str := cel.StringType
	opts := []cel.EnvOption{cel.Variable(varGlobalContext, globalContextType)}
	for _, name := range []string{"Get", "get"} {
		opts = append(opts, cel.Function(name,
			cel.MemberOverload("globalContext_"+name+"_string", []*cel.Type{globalContextType, str}, cel.DynType, cel.FunctionBinding(get)),
			cel.MemberOverload("globalContext_"+name+"_string_string", []*cel.Type{globalContextType, str, str}, cel.DynType, cel.FunctionBinding(get))))
	}
	return cel.Lib(utilityLibrary{compile: opts})
}

// NamespacedGlobalContext refuses globalContext in namespaced policies at
// compile time, where Kyverno refuses it at run time: an entry is
// cluster-wide data read with the controller's rights, which a namespace's
// policy author must not reach through it.
func NamespacedGlobalContext() cel.EnvOption {
	return cel.ASTValidators(namespacedGlobalContextValidator{})
}

type namespacedGlobalContextValidator struct{}

func (namespacedGlobalContextValidator) Name() string { return "sprout.namespacedGlobalContext" }

func (namespacedGlobalContextValidator) Validate(_ *cel.Env, _ cel.ValidatorConfig, a *ast.AST, iss *cel.Issues) {
	for _, id := range ast.MatchDescendants(ast.NavigateAST(a), ast.KindMatcher(ast.IdentKind)) {
		if t := id.Type(); t != nil && t.IsExactType(globalContextType) {
			iss.ReportErrorAtID(id.ID(), "globalContext is not allowed in namespaced policies, as in Kyverno: its entries are cluster-wide")
			return
		}
	}
}

var _ ref.Val = (*globalContextReads)(nil)

func (g *globalContextReads) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("globalContext cannot be converted")
}
func (g *globalContextReads) ConvertToType(t ref.Type) ref.Val {
	return types.NewErr("globalContext cannot be converted to %s", t.TypeName())
}
func (g *globalContextReads) Equal(other ref.Val) ref.Val { return types.Bool(g == other) }
func (g *globalContextReads) Type() ref.Type              { return globalContextType }
func (g *globalContextReads) Value() any                  { return g }
