package celenv

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// walkOption plans every call of env that may walk a list or map so that
// the walk goes through the evaluation's budget (evaluationBudget.visit),
// which stops it with the evaluation:
//
//   - ==, != and `in` on lists walk them through equal, element by
//     element;
//   - every other function that may take a list, a map or an optional
//     first walks its composite arguments (walkSize), charging them, and
//     is called only if the evaluation can afford them. Functions that
//     compare every element with every other are charged that product on
//     top (pairwiseCost) before they start, since they cannot be stopped
//     once called;
//   - the functions sizeGuards names are checked by their guard first.
//
// It is one rule rather than a list of attacks: a function added to the
// environment is walked unless it is known to read a bounded part of its
// arguments (boundedWalk). Calls on scalars only are left as CEL planned
// them.
func walkOption(env *cel.Env) (cel.ProgramOption, error) {
	// The implementations CEL's dispatcher would pick: by overload ID, and
	// by function name for calls dispatched at run time.
	impls := map[string]*functions.Overload{}
	// Functions one of whose overloads takes a value that may be composite.
	takesComposite := map[string]bool{}
	// Functions all of whose overloads read a bounded part of a composite.
	bounded := map[string]bool{}
	for name, fn := range env.Functions() {
		bindings, err := fn.Bindings()
		if err != nil {
			return nil, err
		}
		for _, b := range bindings {
			impls[b.Operator] = b
		}
		bounded[name] = boundedWalk[name]
		all := len(fn.OverloadDecls()) > 0
		for _, o := range fn.OverloadDecls() {
			for _, t := range o.ArgTypes() {
				takesComposite[name] = takesComposite[name] || mayBeComposite(t)
			}
			all = all && hasPrefix(o.ID(), boundedOverloads)
		}
		bounded[name] = bounded[name] || all
	}
	return cel.CustomDecoratorV2(func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
		call, ok := i.(interpreter.InterpretableCall)
		if !ok {
			return i, nil
		}
		fn := call.Function()
		switch fn {
		case operators.Equals, operators.NotEquals:
			if len(call.Args()) == 2 {
				return &equalCall{InterpretableCall: call, lhs: call.Args()[0], rhs: call.Args()[1], negate: fn == operators.NotEquals}, nil
			}
			return i, nil
		}
		guard := sizeGuards[fn]
		if guard == nil && (!takesComposite[fn] || bounded[fn]) {
			return i, nil
		}
		impl := impls[call.OverloadID()]
		if impl == nil {
			impl = impls[fn]
		}
		if impl == nil || impl.NonStrict {
			return i, nil
		}
		c := &walkedCall{InterpretableCall: call, args: call.Args(), impl: impl, guard: guard, measure: !bounded[fn]}
		switch fn {
		case operators.In, operators.OldIn, overloads.DeprecatedIn:
			c.in = true
		}
		return c, nil
	}), nil
}

// boundedWalk are the functions that read a bounded part of their
// composite arguments: in constant time (size, an optional's value, a list
// concatenated lazily, a comprehension's accumulator), or, the guarded
// ones, no more than their guard allows.
var boundedWalk = map[string]bool{
	overloads.Size: true, operators.Add: true, overloads.TypeConvertDyn: true, overloads.TypeConvertType: true,
	"optional.of": true, "optional.ofNonZeroValue": true, "optional.none": true,
	"hasValue": true, "value": true, "or": true, "orValue": true,
	"cel.@mapInsert": true, "first": true, "last": true,
	"replace": true, "join": true, "format": true, "flatten": true,
}

// boundedOverloads are Sprout's functions that copy a value only through
// celjson.Convert, bounded by MaxValueBytes, or read only strings and small maps.
var boundedOverloads = []string{
	"generator_", "resource_", "http_", "globalContext_", "json_marshal_", "dyn_setField_",
	"listObjToMap_", "transform_listObjToMap_",
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// mayBeComposite tells whether a value of type t may be a list, a map or an
// optional.
func mayBeComposite(t *types.Type) bool {
	switch t.Kind() {
	case types.DynKind, types.AnyKind, types.ListKind, types.MapKind, types.TypeParamKind:
		return true
	case types.OpaqueKind:
		return t.TypeName() == "optional_type"
	}
	return false
}

// budgetOf is the budget of the evaluation an activation belongs to, or a
// budget of its own for a program run outside one (constants folded while
// planning): bounded, with no context to look at.
func budgetOf(activation interpreter.Activation) *evaluationBudget {
	if activation != nil {
		if v, ok := activation.ResolveName(varGenerator); ok {
			if g, ok := v.(*generation); ok {
				return &g.budget
			}
		}
	}
	return &evaluationBudget{}
}

// equalCall is == or != walking composite operands through equal. On
// scalars it is CEL's own.
type equalCall struct {
	interpreter.InterpretableCall
	lhs, rhs interpreter.InterpretableV2
	negate   bool
}

func (e *equalCall) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	l := e.lhs.Exec(frame)
	r := e.rhs.Exec(frame)
	if types.IsUnknownOrError(l) {
		return l
	}
	if types.IsUnknownOrError(r) {
		return r
	}
	var eq ref.Val
	if isComposite(l) || isComposite(r) {
		b := budgetOf(frame)
		eq = equal(b, l, r)
		if b.stopped {
			// Not absorbed by !=: the evaluation is over.
			return eq
		}
	} else {
		eq = types.Equal(l, r)
	}
	if e.negate {
		return types.Bool(eq != types.True)
	}
	return eq
}

func (e *equalCall) Eval(activation interpreter.Activation) ref.Val {
	return e.Exec(interpreter.AsFrame(activation))
}

// walkedCall is a call planned as CEL plans it (strict arguments, the
// implementation's operand trait, the receiver as fallback), whose
// composite arguments are walked through the evaluation's budget before
// the implementation is called, and `in` on a list, which compares
// through equal.
type walkedCall struct {
	interpreter.InterpretableCall
	args    []interpreter.InterpretableV2
	impl    *functions.Overload
	guard   func([]ref.Val) error // sizeGuards' check, or nil
	measure bool                  // walk the composite arguments first
	in      bool                  // elem in list
}

func (c *walkedCall) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	// Arguments are evaluated as CEL's own calls evaluate them: a unary or
	// binary call all of them before looking for an error, a call of more
	// up to the first error.
	args := make([]ref.Val, len(c.args))
	for i, a := range c.args {
		args[i] = a.Exec(frame)
		if len(args) > 2 && types.IsUnknownOrError(args[i]) {
			return args[i]
		}
	}
	for _, v := range args {
		if types.IsUnknownOrError(v) {
			return v
		}
	}
	if len(args) == 0 {
		return types.LabelErrNode(c.ID(), invoke(c.impl, args))
	}
	if c.impl.OperandTrait != 0 && !args[0].Type().HasTrait(c.impl.OperandTrait) {
		if r, ok := args[0].(traits.Receiver); ok && args[0].Type().HasTrait(traits.ReceiverType) {
			return types.LabelErrNode(c.ID(), r.Receive(c.Function(), c.OverloadID(), args[1:]))
		}
		return types.NewErrWithNodeID(c.ID(), "no such overload: %s", c.Function())
	}
	if c.guard != nil {
		if err := c.guard(args); err != nil {
			return types.WrapErr(fmt.Errorf("%s: %w", c.Function(), err))
		}
	}
	if c.in && len(args) == 2 {
		if list, ok := args[1].(traits.Lister); ok {
			return contains(budgetOf(frame), list, args[0])
		}
	} else if c.measure {
		if stopped := c.walk(frame, args); stopped != nil {
			return stopped
		}
	}
	return types.LabelErrNode(c.ID(), invoke(c.impl, args))
}

// walk visits the composite arguments, and charges what comparing them
// pairwise costs when the function does; non-nil when the evaluation
// stopped.
func (c *walkedCall) walk(frame *interpreter.ExecutionFrame, args []ref.Val) ref.Val {
	var b *evaluationBudget
	var sizes [4]uint64
	for i, a := range args {
		if !isComposite(a) {
			continue
		}
		if b == nil {
			b = budgetOf(frame)
		}
		size, ok := walkSize(b, a)
		if !ok {
			return b.stop()
		}
		if i < len(sizes) {
			sizes[i] = size
		}
	}
	if b == nil {
		return nil
	}
	if extra := pairwiseCost(c.Function(), args, sizes[:]); extra > 0 && !b.visit(extra) {
		return b.stop()
	}
	return nil
}

// pairwiseCost is what a function that compares elements with other
// elements may visit beyond its arguments' size, for the functions that
// do: distinct compares each element with those it kept, sets.* each
// element of one list with each of the other; sort is charged the same as
// distinct, the worst case CEL itself charges it after the call.
func pairwiseCost(function string, args []ref.Val, sizes []uint64) uint64 {
	count := func(i int) uint64 {
		if i < len(args) {
			if l, ok := args[i].(traits.Lister); ok {
				if n, ok := l.Size().(types.Int); ok && n > 0 {
					return uint64(n)
				}
			}
		}
		return 0
	}
	switch function {
	case "distinct", "sort":
		return mulCapped(count(0), sizes[0])
	case "sets.contains", "sets.intersects", "sets.equivalent":
		cost := min(mulCapped(count(1), sizes[0]), mulCapped(count(0), sizes[1]))
		if function == "sets.equivalent" {
			cost = mulCapped(cost, 2)
		}
		return cost
	case "@sortByAssociatedKeys":
		return mulCapped(count(1), sizes[1])
	}
	return 0
}

// mulCapped is a*b, or the largest uint64 when that overflows: any cost past
// the budget is as refused as another.
func mulCapped(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return ^uint64(0) >> 1
	}
	return lo
}

func (c *walkedCall) Eval(activation interpreter.Activation) ref.Val {
	return c.Exec(interpreter.AsFrame(activation))
}

// invoke calls o as CEL's planner would for len(args) arguments.
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
