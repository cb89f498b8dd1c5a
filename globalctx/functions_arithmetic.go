package globalctx

import (
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/kyverno/go-jmespath"
	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Kyverno's arithmetic errors.
const (
	zeroDivisionError = errorPrefix + "Zero divisor passed"
	nonIntModuloError = errorPrefix + "Non-integer argument(s) passed for modulo"
	typeMismatchError = errorPrefix + "Types mismatch"
)

// arithmeticFunctions are Kyverno's add, sum, subtract, multiply, divide
// and modulo, over numbers, quantities ("250m", "1Gi") and durations
// ("1h30m"): a quantity or duration is written as a string, and the
// result of one is a string too.
func arithmeticFunctions() []jmespath.FunctionEntry {
	binary := func(name string, f func(a, b operand) (any, error)) jmespath.FunctionEntry {
		return fn(name, func(arguments []any) (any, error) {
			a, b, err := operands(arguments, name)
			if err != nil {
				return nil, err
			}
			return f(a, b)
		}, jpAny, jpAny)
	}
	return []jmespath.FunctionEntry{
		binary("add", func(a, b operand) (any, error) { return a.add(b, "add") }),
		binary("subtract", func(a, b operand) (any, error) { return a.subtract(b) }),
		binary("multiply", func(a, b operand) (any, error) { return a.multiply(b) }),
		binary("divide", func(a, b operand) (any, error) { return a.divide(b) }),
		binary("modulo", func(a, b operand) (any, error) { return a.modulo(b) }),
		fn("sum", jpSum, jpArray),
	}
}

func jpSum(arguments []any) (any, error) {
	items, ok := arguments[0].([]any)
	if !ok {
		return nil, formatError(typeMismatchError, "sum")
	}
	if len(items) == 0 {
		return nil, formatError(genericError, "sum", "at least one element in the array is required")
	}
	result := items[0]
	for _, item := range items[1:] {
		a, b, err := operands([]any{result, item}, "sum")
		if err != nil {
			return nil, err
		}
		if result, err = a.add(b, "sum"); err != nil {
			return nil, err
		}
	}
	return result, nil
}

// operand is a number, a quantity or a duration.
type operand interface {
	add(b operand, name string) (any, error)
	subtract(b operand) (any, error)
	multiply(b operand) (any, error)
	divide(b operand) (any, error)
	modulo(b operand) (any, error)
}

type (
	quantity struct{ resource.Quantity }
	duration struct{ time.Duration }
	scalar   struct{ float64 }
)

// operands reads the two arguments: a number, or a string that is a
// quantity or else a duration.
func operands(arguments []any, name string) (operand, operand, error) {
	var out [2]operand
	for i := range out {
		if v, err := validateArg(name, arguments, i, reflect.Float64); err == nil {
			out[i] = scalar{v.Float()}
			continue
		}
		if v, err := validateArg(name, arguments, i, reflect.String); err == nil {
			if q, err := resource.ParseQuantity(v.String()); err == nil {
				out[i] = quantity{q}
				continue
			}
			if d, err := time.ParseDuration(v.String()); err == nil {
				out[i] = duration{d}
				continue
			}
		}
		return nil, nil, formatError(genericError, name, "invalid operand")
	}
	return out[0], out[1], nil
}

func (a quantity) add(b operand, name string) (any, error) {
	if v, ok := b.(quantity); ok {
		a.Add(v.Quantity)
		return a.String(), nil
	}
	return nil, formatError(typeMismatchError, name)
}

func (a duration) add(b operand, name string) (any, error) {
	if v, ok := b.(duration); ok {
		return (a.Duration + v.Duration).String(), nil
	}
	return nil, formatError(typeMismatchError, name)
}

func (a scalar) add(b operand, name string) (any, error) {
	if v, ok := b.(scalar); ok {
		return a.float64 + v.float64, nil
	}
	return nil, formatError(typeMismatchError, name)
}

func (a quantity) subtract(b operand) (any, error) {
	if v, ok := b.(quantity); ok {
		a.Sub(v.Quantity)
		return a.String(), nil
	}
	return nil, formatError(typeMismatchError, "subtract")
}

func (a duration) subtract(b operand) (any, error) {
	if v, ok := b.(duration); ok {
		return (a.Duration - v.Duration).String(), nil
	}
	return nil, formatError(typeMismatchError, "subtract")
}

func (a scalar) subtract(b operand) (any, error) {
	if v, ok := b.(scalar); ok {
		return a.float64 - v.float64, nil
	}
	return nil, formatError(typeMismatchError, "subtract")
}

func (a quantity) multiply(b operand) (any, error) {
	v, ok := b.(scalar)
	if !ok {
		return nil, formatError(typeMismatchError, "multiply")
	}
	q, err := resource.ParseQuantity(fmt.Sprintf("%v", v.float64))
	if err != nil {
		return nil, err
	}
	var prod inf.Dec
	prod.Mul(a.AsDec(), q.AsDec())
	return resource.NewDecimalQuantity(prod, a.Format).String(), nil
}

func (a duration) multiply(b operand) (any, error) {
	if v, ok := b.(scalar); ok {
		return time.Duration(a.Seconds() * v.float64 * float64(time.Second)).String(), nil
	}
	return nil, formatError(typeMismatchError, "multiply")
}

func (a scalar) multiply(b operand) (any, error) {
	switch v := b.(type) {
	case scalar:
		return a.float64 * v.float64, nil
	case quantity:
		return v.multiply(a)
	case duration:
		return v.multiply(a)
	}
	return nil, formatError(typeMismatchError, "multiply")
}

func (a quantity) divide(b operand) (any, error) {
	switch v := b.(type) {
	case quantity:
		divisor := v.AsApproximateFloat64()
		if divisor == 0 {
			return nil, formatError(zeroDivisionError, "divide")
		}
		return a.AsApproximateFloat64() / divisor, nil
	case scalar:
		if v.float64 == 0 {
			return nil, formatError(zeroDivisionError, "divide")
		}
		q, err := resource.ParseQuantity(fmt.Sprintf("%v", v.float64))
		if err != nil {
			return nil, err
		}
		var quo inf.Dec
		scale := inf.Scale(math.Max(float64(a.AsDec().Scale()), float64(q.AsDec().Scale())))
		quo.QuoRound(a.AsDec(), q.AsDec(), scale, inf.RoundDown)
		return resource.NewDecimalQuantity(quo, a.Format).String(), nil
	}
	return nil, formatError(typeMismatchError, "divide")
}

func (a duration) divide(b operand) (any, error) {
	switch v := b.(type) {
	case duration:
		if v.Seconds() == 0 {
			return nil, formatError(zeroDivisionError, "divide")
		}
		return a.Seconds() / v.Seconds(), nil
	case scalar:
		if v.float64 == 0 {
			return nil, formatError(zeroDivisionError, "divide")
		}
		return time.Duration(a.Seconds() / v.float64 * float64(time.Second)).String(), nil
	}
	return nil, formatError(typeMismatchError, "divide")
}

func (a scalar) divide(b operand) (any, error) {
	v, ok := b.(scalar)
	if !ok {
		return nil, formatError(typeMismatchError, "divide")
	}
	if v.float64 == 0 {
		return nil, formatError(zeroDivisionError, "divide")
	}
	return a.float64 / v.float64, nil
}

func (a quantity) modulo(b operand) (any, error) {
	v, ok := b.(quantity)
	if !ok {
		return nil, formatError(typeMismatchError, "modulo")
	}
	i1, i2, err := integers(a.ToDec().AsApproximateFloat64(), v.ToDec().AsApproximateFloat64())
	if err != nil {
		return nil, err
	}
	return resource.NewQuantity(i1%i2, a.Format).String(), nil
}

func (a duration) modulo(b operand) (any, error) {
	v, ok := b.(duration)
	if !ok {
		return nil, formatError(typeMismatchError, "modulo")
	}
	if v.Duration == 0 {
		return nil, formatError(zeroDivisionError, "modulo")
	}
	return (a.Duration % v.Duration).String(), nil
}

func (a scalar) modulo(b operand) (any, error) {
	v, ok := b.(scalar)
	if !ok {
		return nil, formatError(typeMismatchError, "modulo")
	}
	i1, i2, err := integers(a.float64, v.float64)
	if err != nil {
		return nil, err
	}
	return float64(i1 % i2), nil
}

// integers are the operands of a modulo, which must be whole and the
// divisor not zero.
func integers(f1, f2 float64) (int64, int64, error) {
	i1, i2 := int64(f1), int64(f2)
	switch {
	case f1 != float64(i1) || f2 != float64(i2):
		return 0, 0, formatError(nonIntModuloError, "modulo")
	case i2 == 0:
		return 0, 0, formatError(zeroDivisionError, "modulo")
	}
	return i1, i2, nil
}
