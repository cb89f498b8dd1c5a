package celenv

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// sizeGuards are the library functions whose result can be far larger than
// their arguments: s.replace("", big) repeats big, a list of one string
// repeated by concatenation joins into its copies. CEL charges them by their
// result, once it is built; each guard computes the size of the result from
// the arguments and refuses one over MaxValueBytes before it is built.
var sizeGuards = map[string]func(args []ref.Val) error{
	"replace": guardReplace,
	"join":    guardJoin,
	"format":  guardFormat,
	"flatten": guardFlatten,
}

// sizeGuardOption plans every call of a guarded function as its check
// followed by the function's own binding, taken from env.
func sizeGuardOption(env *cel.Env) (cel.ProgramOption, error) {
	impls := map[string]*functions.Overload{}
	for name := range sizeGuards {
		bindings, err := env.Functions()[name].Bindings()
		if err != nil {
			return nil, err
		}
		for _, b := range bindings {
			impls[name+"/"+b.Operator] = b
		}
	}
	return cel.CustomDecoratorV2(func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
		call, ok := i.(interpreter.InterpretableCall)
		if !ok {
			return i, nil
		}
		check, ok := sizeGuards[call.Function()]
		if !ok {
			return i, nil
		}
		// On dyn arguments the overload is chosen at run time: the
		// binding named after the function dispatches.
		impl := impls[call.Function()+"/"+call.OverloadID()]
		if impl == nil {
			impl = impls[call.Function()+"/"+call.Function()]
		}
		if impl == nil {
			return i, nil
		}
		return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(args ...ref.Val) ref.Val {
			if err := check(args); err != nil {
				return types.WrapErr(fmt.Errorf("%s: %w", call.Function(), err))
			}
			return invoke(impl, args)
		}), nil
	}), nil
}

func invoke(o *functions.Overload, args []ref.Val) ref.Val {
	switch {
	case len(args) == 1 && o.Unary != nil:
		return o.Unary(args[0])
	case len(args) == 2 && o.Binary != nil:
		return o.Binary(args[0], args[1])
	case o.Function != nil:
		return o.Function(args...)
	}
	return types.NewErr("no such overload")
}

func tooLarge(size int64) error {
	if size > MaxValueBytes {
		return fmt.Errorf("the result would have %d bytes or more, over the limit of %d", size, MaxValueBytes)
	}
	return nil
}

// guardReplace sizes s.replace(old, new[, n]).
func guardReplace(args []ref.Val) error {
	if len(args) < 3 {
		return nil
	}
	s, ok1 := args[0].(types.String)
	old, ok2 := args[1].(types.String)
	repl, ok3 := args[2].(types.String)
	if !ok1 || !ok2 || !ok3 || len(repl) <= len(old) {
		return nil
	}
	var count int64
	if old == "" {
		count = int64(utf8.RuneCountInString(string(s))) + 1
	} else {
		count = int64(strings.Count(string(s), string(old)))
	}
	if len(args) == 4 {
		if n, ok := args[3].(types.Int); ok && n >= 0 && int64(n) < count {
			count = int64(n)
		}
	}
	return tooLarge(int64(len(s)) + count*int64(len(repl)-len(old)))
}

// guardJoin sizes list.join([sep]), adding up the strings until they are
// over the limit.
func guardJoin(args []ref.Val) error {
	l, ok := args[0].(traits.Lister)
	if !ok {
		return nil
	}
	var sep int64
	if len(args) == 2 {
		if s, ok := args[1].(types.String); ok {
			sep = int64(len(s))
		}
	}
	var size int64
	for it := l.Iterator(); it.HasNext() == types.True; {
		if s, ok := it.Next().(types.String); ok {
			size += int64(len(s))
		}
		size += sep
		if err := tooLarge(size); err != nil {
			return err
		}
	}
	return nil
}

// guardFlatten counts the elements list.flatten([depth]) makes, stopping
// once they are over MaxListElements: the count visits no more than that
// many leaves, however much the nested lists share.
func guardFlatten(args []ref.Val) error {
	l, ok := args[0].(traits.Lister)
	if !ok {
		return nil
	}
	depth := int64(1)
	if len(args) == 2 {
		if d, ok := args[1].(types.Int); ok {
			depth = int64(d)
		}
	}
	budget := int64(MaxListElements)
	if !countFlat(l, depth, &budget) {
		return fmt.Errorf("the result would have more than %d elements", MaxListElements)
	}
	return nil
}

// countFlat takes the elements l flattened to depth makes from budget,
// and reports whether they fit.
func countFlat(l traits.Lister, depth int64, budget *int64) bool {
	n, ok := l.Size().(types.Int)
	if !ok {
		return true // not a list CEL built: flatten reports it
	}
	// By index rather than by iterator: an iterator is an allocation for
	// each of the (many) inner lists visited.
	for i := types.Int(0); i < n; i++ {
		v := l.Get(i)
		if inner, ok := v.(traits.Lister); ok && depth > 0 {
			if !countFlat(inner, depth-1, budget) {
				return false
			}
			continue
		}
		if *budget--; *budget < 0 {
			return false
		}
	}
	return true
}

// guardFormat sizes format.format(args) by its arguments as JSON, about as
// long as %s writes them.
func guardFormat(args []ref.Val) error {
	if len(args) != 2 {
		return nil
	}
	size := int64(stringBytes(args[0])) + int64(valueBytes(args[1], MaxValueBytes+1))
	return tooLarge(size)
}
