package lib

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
	{name: "image", typ: cel.OpaqueType("image.Context"), functions: []unsupportedFunction{
		{name: "GetMetadata", arities: []int{1}},
	}},
}

// unsupportedLibrary declares unsupportedVariables, under both Kyverno
// spellings of each function (Get and get), and the validator that rejects
// every use of them.
func unsupportedLibrary(resource *cel.Type) cel.EnvOption {
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
						cel.FunctionBinding(notSupported(v.name+"."+name+" is not supported by Sprout (yet)"))))
				}
				opts = append(opts, cel.Function(name, overloads...))
			}
		}
	}
	opts = append(opts, unsupportedOverloadDecls(resource)...)
	return cel.Lib(utilityLibrary{compile: opts})
}

// unsupportedOverloads are calls of supported libraries that Sprout refuses,
// by overload, with the reason; an expression is refused only when every
// overload its call could mean is here, so a call CEL resolves at run time
// between a supported form and one of these still compiles.
var unsupportedOverloads = map[string]string{
	"resource_Post_string_string_map":                     "resource.Post is not supported by Sprout (yet)",
	"resource_Post_string_string_string_map":              "resource.Post is not supported by Sprout (yet)",
	"resource_post_string_string_map":                     "resource.post is not supported by Sprout (yet)",
	"resource_post_string_string_string_map":              "resource.post is not supported by Sprout (yet)",
	"resource_Get_string_string_string_string_stringlist": "resource.Get of subresources is not supported by Sprout (yet): the caches hold objects, not their subresources",
	"resource_Get_gvr_string_string_stringlist":           "resource.Get of subresources is not supported by Sprout (yet): the caches hold objects, not their subresources",
	"resource_get_string_string_string_string_stringlist": "resource.get of subresources is not supported by Sprout (yet): the caches hold objects, not their subresources",
	"resource_get_gvr_string_string_stringlist":           "resource.get of subresources is not supported by Sprout (yet): the caches hold objects, not their subresources",
	"parseServiceAccount_string":                          "parseServiceAccount is not available to generating policies: a watch event has no requesting user",
}

// unsupportedOverloadDecls declares the overloads of unsupportedOverloads, so
// that a call of one type-checks and the validator can name it.
func unsupportedOverloadDecls(resource *cel.Type) []cel.EnvOption {
	str, strList := cel.StringType, cel.ListType(cel.StringType)
	gvr, body := cel.MapType(str, str), cel.MapType(str, cel.DynType)
	decl := func(id string, args ...*cel.Type) cel.FunctionOpt {
		return cel.MemberOverload(id, append([]*cel.Type{resource}, args...), cel.DynType,
			cel.FunctionBinding(notSupported(unsupportedOverloads[id])))
	}
	var opts []cel.EnvOption
	for _, name := range []string{"Post", "post"} {
		opts = append(opts, cel.Function(name,
			decl("resource_"+name+"_string_string_map", str, str, body),
			decl("resource_"+name+"_string_string_string_map", str, str, str, body)))
	}
	for _, name := range []string{"Get", "get"} {
		opts = append(opts, cel.Function(name,
			decl("resource_"+name+"_string_string_string_string_stringlist", str, str, str, str, strList),
			decl("resource_"+name+"_gvr_string_string_stringlist", gvr, str, str, strList)))
	}
	return append(opts, cel.Function("parseServiceAccount", cel.Overload("parseServiceAccount_string",
		[]*cel.Type{str}, cel.DynType, cel.FunctionBinding(notSupported(unsupportedOverloads["parseServiceAccount_string"])))))
}

// notSupported is the binding of a rejected function: never reached, since
// the validator fails every expression that calls one.
func notSupported(message string) func(...ref.Val) ref.Val {
	return func(...ref.Val) ref.Val {
		return types.NewErr("%s", message)
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
	for _, call := range ast.MatchDescendants(root, ast.KindMatcher(ast.CallKind)) {
		if message, ok := refusedOverload(a.GetOverloadIDs(call.ID())); ok {
			iss.ReportErrorAtID(call.ID(), "%s", message)
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

// refusedOverload is the reason to refuse a call that could mean only the
// overloads ids, all of them in unsupportedOverloads.
func refusedOverload(ids []string) (string, bool) {
	message := ""
	for _, id := range ids {
		m, ok := unsupportedOverloads[id]
		if !ok {
			return "", false
		}
		message = m
	}
	return message, message != ""
}
