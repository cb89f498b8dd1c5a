package lib

import (
	"math"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// mathLibrary adds Kyverno's two-argument math.round to the math.round(double)
// of cel-go's ext.Math; the checker tells them apart by argument count:
//
//	math.round(double, int) -> double   // math.round(10.125, 2) → 10.13
//	                                    // math.round(12345.6789, -2) → 12300.0
//
// Halves round away from zero, on the double's binary value as Kyverno does
// (math.round(1.005, 2) is 1.0: 1.005 is stored as 1.00499…).
func mathLibrary() cel.EnvOption {
	return cel.Lib(utilityLibrary{compile: []cel.EnvOption{
		cel.Function("math.round", cel.Overload("math_round_double_int",
			[]*cel.Type{cel.DoubleType, cel.IntType}, cel.DoubleType,
			cel.BinaryBinding(roundTo))),
	}})
}

// roundTo rounds x to digits decimal places; negative digits round to tens,
// hundreds and so on.
func roundTo(x, digits ref.Val) ref.Val {
	xv, ok := x.(types.Double)
	if !ok {
		return types.MaybeNoSuchOverloadErr(x)
	}
	d, ok := digits.(types.Int)
	if !ok {
		return types.MaybeNoSuchOverloadErr(digits)
	}
	v := float64(xv)
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return xv
	}
	// Scaling by 10^|d| in the right direction keeps tens and hundreds exact,
	// where multiplying by an inexact 0.01 would not.
	if d >= 0 {
		scale := math.Pow(10, float64(d))
		scaled := v * scale
		if math.IsInf(scaled, 0) { // finer than a double holds: nothing to round
			return xv
		}
		return types.Double(math.Round(scaled) / scale)
	}
	scale := math.Pow(10, float64(-d))
	if math.IsInf(scale, 0) { // coarser than any double: rounds to zero
		return types.Double(math.Copysign(0, v))
	}
	return types.Double(math.Round(v/scale) * scale)
}
