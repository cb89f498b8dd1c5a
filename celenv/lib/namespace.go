package lib

import (
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// Kyverno groups several of its functions under a variable of an opaque type,
// so that json.unmarshal(s) is a member call on the variable json. The
// variable carries no state: one value serves every evaluation and is bound
// once per program as a global, never through the per-evaluation activation.

// utilityLibrary is a cel.Library from plain compile and program options.
type utilityLibrary struct {
	compile []cel.EnvOption
	program []cel.ProgramOption
}

func (l utilityLibrary) CompileOptions() []cel.EnvOption     { return l.compile }
func (l utilityLibrary) ProgramOptions() []cel.ProgramOption { return l.program }

// namespaceLibrary declares the variable name of type typ, bound in every
// program to a stateless value, and the functions declared on it.
func namespaceLibrary(name string, typ *cel.Type, functions ...cel.EnvOption) cel.EnvOption {
	return cel.Lib(utilityLibrary{
		compile: append([]cel.EnvOption{cel.Variable(name, typ)}, functions...),
		program: []cel.ProgramOption{cel.Globals(map[string]any{name: namespaceValue{typ: typ}})},
	})
}

// namespaceValue is the value of a variable that only groups functions.
type namespaceValue struct{ typ *cel.Type }

var _ ref.Val = namespaceValue{}

func (n namespaceValue) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("%s cannot be converted", n.typ)
}
func (n namespaceValue) ConvertToType(t ref.Type) ref.Val {
	return types.NewErr("%s cannot be converted to %s", n.typ, t.TypeName())
}
func (n namespaceValue) Equal(other ref.Val) ref.Val { return types.Bool(n == other) }
func (n namespaceValue) Type() ref.Type              { return n.typ }
func (n namespaceValue) Value() any                  { return n }
