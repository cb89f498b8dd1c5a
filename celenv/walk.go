package celenv

import (
	"errors"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apiserver/pkg/cel/lazy"
)

// Walking a value. Lists and maps share their elements, so a few short
// variables ([x, x] nested forty times) stand for a value of 2^40 elements:
// its logical size, not its memory, is what equality, `in`, sorting or
// converting it costs. CEL charges such calls after they return and checks
// its context only between comprehension steps, so one call over such a
// value would run far past any time limit. Every walk Sprout makes over a
// value goes through visit instead: it charges the evaluation's budget for
// the elements and bytes visited, and checks the evaluation's context as
// it goes, so a walk stops within the evaluation's time limit and its
// budget.

// walkCheckEvery is how many elements a walk visits between two looks at
// the evaluation's context: often enough to stop within a small part of any
// time limit, seldom enough to cost nothing next to the visits.
const walkCheckEvery = 1024

// walkElementsPerUnit is what one unit of cost buys a walk: ten elements or
// bytes visited, as CEL charges a traversal (common.StringTraversalCostFactor).
const walkElementsPerUnit = 10

// visit counts n elements (a byte of a string counts as one) a walk is about
// to visit, and reports whether it may go on: false once the evaluation's
// budget is spent or its context ended. It is called on every element, so
// it only adds up; settle charges and looks at the context now and then.
func (b *evaluationBudget) visit(n uint64) bool {
	if b.stopped {
		return false
	}
	b.walked += n
	if b.walked < walkCheckEvery {
		return true
	}
	return b.settle()
}

// settle charges what the walks visited since the last settle and looks at
// the evaluation's context.
func (b *evaluationBudget) settle() bool {
	units := b.walked / walkElementsPerUnit
	b.walked -= units * walkElementsPerUnit
	b.spent += units
	switch {
	case b.spent > PerEvaluationCostLimit:
		b.exceeded()
		b.stopped = true
	case b.done != nil:
		select {
		case <-b.done:
			b.stopped = true
		default:
		}
	}
	return !b.stopped
}

// errWalkStopped is what a walk returns when its evaluation stopped; the
// evaluation reports why (cause), whatever the expression did with it.
var errWalkStopped = errors.New("the evaluation stopped during a walk over a value")

// charge is visit as celjson.ConvertSized takes it: errWalkStopped once
// the copy must stop.
func (b *evaluationBudget) charge(n uint64) error {
	if !b.visit(n) {
		return errWalkStopped
	}
	return nil
}

// stop is the CEL error a walk returns once visit said to stop.
func (b *evaluationBudget) stop() ref.Val {
	if b.err != nil {
		return types.WrapErr(b.err)
	}
	return types.WrapErr(errWalkStopped)
}

// isComposite tells the values a walk may have to go into.
func isComposite(v ref.Val) bool {
	switch v.(type) {
	case traits.Lister, traits.Mapper, *types.Optional:
		return true
	}
	return false
}

// leafSize is what visiting a value that is not a list or map costs: one,
// and a string or bytes one more per byte, as comparing or copying them
// reads every byte.
func leafSize(v ref.Val) uint64 {
	switch x := v.(type) {
	case types.String:
		return 1 + uint64(len(x))
	case types.Bytes:
		return 1 + uint64(len(x))
	}
	return 1
}

// equal is CEL's equality (types.Equal, and so ==, != and in), walking
// lists, maps and optionals itself through b.
func equal(b *evaluationBudget, l, r ref.Val) ref.Val {
	lNull, rNull := l == types.NullValue, r == types.NullValue
	if lNull || rNull {
		return types.Bool(lNull == rNull)
	}
	return equalValues(b, l, r)
}

// equalValues is l.Equal(r), walked through b. Lists and maps compare as
// CEL's do (same size; then element by element, or key by key, the first
// unequal pair deciding); an element whose comparison fails makes a list
// comparison fail unless another pair is unequal, as CEL's concatenated
// lists do. Every other value compares with its own Equal, the variables
// map by identity.
func equalValues(b *evaluationBudget, l, r ref.Val) ref.Val {
	switch lv := l.(type) {
	case traits.Lister:
		rl, ok := r.(traits.Lister)
		if !ok {
			return types.False
		}
		n, ok := lv.Size().(types.Int)
		if !ok || n != rl.Size() {
			return types.False
		}
		var failed ref.Val
		for i := types.Int(0); i < n; i++ {
			if !b.visit(1) {
				return b.stop()
			}
			eq := equal(b, lv.Get(i), rl.Get(i))
			switch {
			case b.stopped:
				return b.stop()
			case eq == types.False:
				return types.False
			case failed == nil && types.IsUnknownOrError(eq):
				failed = eq
			}
		}
		if failed != nil {
			return failed
		}
		return types.True
	case *lazy.MapValue:
		return lv.Equal(r)
	case traits.Mapper:
		rm, ok := r.(traits.Mapper)
		if !ok {
			return types.False
		}
		if lv.Size() != rm.Size() {
			return types.False
		}
		for it := lv.Iterator(); it.HasNext() == types.True; {
			if !b.visit(1) {
				return b.stop()
			}
			key := it.Next()
			lval, _ := lv.Find(key)
			rval, found := rm.Find(key)
			if !found {
				return types.False
			}
			eq := equal(b, lval, rval)
			switch {
			case b.stopped:
				return b.stop()
			case eq == types.False:
				return types.False
			}
		}
		return types.True
	case *types.Optional:
		ro, ok := r.(*types.Optional)
		switch {
		case !ok:
			return types.False
		case !lv.HasValue():
			return types.Bool(!ro.HasValue())
		case !ro.HasValue():
			return types.False
		}
		return equalValues(b, lv.GetValue(), ro.GetValue())
	}
	if !b.visit(leafSize(l)) {
		return b.stop()
	}
	return l.Equal(r)
}

// contains is `elem in list`, comparing through b: true when an element
// equals elem, as CEL's lists answer.
func contains(b *evaluationBudget, list traits.Lister, elem ref.Val) ref.Val {
	n, ok := list.Size().(types.Int)
	if !ok {
		return list.Contains(elem)
	}
	for i := types.Int(0); i < n; i++ {
		if !b.visit(1) {
			return b.stop()
		}
		eq := equal(b, elem, list.Get(i))
		if b.stopped {
			return b.stop()
		}
		if eq == types.True {
			return types.True
		}
	}
	return types.False
}

// walkSize visits v whole through b and returns its logical size: one per
// list element, map entry and value, and one per byte of its strings. It
// stops early, returning false, when b says to. The variables map is not
// walked: reading it would evaluate every variable.
func walkSize(b *evaluationBudget, v ref.Val) (uint64, bool) {
	switch x := v.(type) {
	case traits.Lister:
		n, ok := x.Size().(types.Int)
		if !ok {
			return 1, b.visit(1)
		}
		size := uint64(1)
		if !b.visit(1) {
			return size, false
		}
		for i := types.Int(0); i < n; i++ {
			s, ok := walkSize(b, x.Get(i))
			size += s
			if !ok {
				return size, false
			}
		}
		return size, true
	case *lazy.MapValue:
		return 1, b.visit(1)
	case traits.Mapper:
		size := uint64(1)
		if !b.visit(1) {
			return size, false
		}
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := walkSize(b, k)
			size += ks
			if !ok {
				return size, false
			}
			val, _ := x.Find(k)
			vs, ok := walkSize(b, val)
			size += vs
			if !ok {
				return size, false
			}
		}
		return size, true
	case *types.Optional:
		if !x.HasValue() {
			return 1, b.visit(1)
		}
		return walkSize(b, x.GetValue())
	}
	n := leafSize(v)
	return n, b.visit(n)
}

// allBools tells whether v is a bool or a (nested) list of them, as a
// generate expression must return, walking it through b.
func allBools(b *evaluationBudget, v ref.Val) (bool, error) {
	switch v := v.(type) {
	case types.Bool:
		return true, nil
	case traits.Lister:
		n, ok := v.Size().(types.Int)
		if !ok {
			return false, nil
		}
		for i := types.Int(0); i < n; i++ {
			if !b.visit(1) {
				return false, errWalkStopped
			}
			ok, err := allBools(b, v.Get(i))
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	}
	return false, nil
}
