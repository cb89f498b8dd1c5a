package celenv

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// variableRefs returns the names the expression reads as variables.<name>
// or variables["name"], in the order they first appear.
func variableRefs(ast *cel.Ast) []string {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	celast.PostOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.SelectKind:
			sel := e.AsSelect()
			if isIdent(sel.Operand(), varVariables) {
				add(sel.FieldName())
			}
		case celast.CallKind:
			call := e.AsCall()
			if call.FunctionName() != operators.Index || len(call.Args()) != 2 || !isIdent(call.Args()[0], varVariables) {
				return
			}
			if key := call.Args()[1]; key.Kind() == celast.LiteralKind {
				if s, ok := key.AsLiteral().(types.String); ok {
					add(string(s))
				}
			}
		}
	}))
	return names
}

func isIdent(e celast.Expr, name string) bool {
	return e.Kind() == celast.IdentKind && e.AsIdent() == name
}

// exceptionsRefs returns the keys the expression reads of the exceptions
// variable, as exceptions.<key> or exceptions["key"], that it does not have.
func exceptionsRefs(ast *cel.Ast) []string {
	var unknown []string
	add := func(k string) {
		if k != keyAllowedImages && k != keyAllowedValues && !slices.Contains(unknown, k) {
			unknown = append(unknown, k)
		}
	}
	celast.PostOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.SelectKind:
			if sel := e.AsSelect(); isIdent(sel.Operand(), varExceptions) {
				add(sel.FieldName())
			}
		case celast.CallKind:
			call := e.AsCall()
			if call.FunctionName() != operators.Index || len(call.Args()) != 2 || !isIdent(call.Args()[0], varExceptions) {
				return
			}
			if key := call.Args()[1]; key.Kind() == celast.LiteralKind {
				if s, ok := key.AsLiteral().(types.String); ok {
					add(string(s))
				}
			}
		}
	}))
	return unknown
}

// checkVariableRefs reports every variable the expression reads that is not
// in defined (the variables declared before it), so a typo or a forward
// reference fails at compile time instead of on the first trigger; and
// every key of exceptions but allowedImages and allowedValues, which
// Kyverno's type for it refuses at compile time too.
func checkVariableRefs(ast *cel.Ast, defined []string) error {
	if bad := exceptionsRefs(ast); len(bad) > 0 {
		return fmt.Errorf("exceptions has no field %s: it has %s and %s", strings.Join(bad, ", "), keyAllowedImages, keyAllowedValues)
	}
	var unknown []string
	for _, n := range variableRefs(ast) {
		if !slices.Contains(defined, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	known := "none"
	if len(defined) > 0 {
		sorted := slices.Clone(defined)
		sort.Strings(sorted)
		known = strings.Join(sorted, ", ")
	}
	return fmt.Errorf("undefined variable %s (defined before this expression: %s)", "variables."+strings.Join(unknown, ", variables."), known)
}
