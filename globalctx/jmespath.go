package globalctx

import (
	"fmt"
	"math"
	"reflect"

	"github.com/kyverno/go-jmespath"
)

// functions are JMESPath's functions and the Kyverno functions Sprout
// has, registered once: projections call them as Kyverno's do. Only read
// after init, so safe for concurrent use.
var functions = newFunctionCaller()

func newFunctionCaller() *jmespath.FunctionCaller {
	fc := jmespath.NewFunctionCaller()
	for _, f := range kyvernoFunctions() {
		fc.Register(f)
	}
	return fc
}

// Search evaluates the JMESPath expression over data as a projection is
// evaluated, Kyverno's functions included.
func Search(expression string, data any) (any, error) {
	jp, err := jmespath.Compile(expression)
	if err != nil {
		return nil, err
	}
	return search(jp, data)
}

func search(jp *jmespath.JMESPath, data any) (any, error) {
	return jp.Search(data, jmespath.WithFunctionCaller(functions))
}

// Kyverno's argument types, and how it words their errors.
var (
	jpString = jmespath.JpString
	jpNumber = jmespath.JpNumber
	jpObject = jmespath.JpObject
	jpArray  = jmespath.JpArray
	jpAny    = jmespath.JpAny
)

const (
	errorPrefix              = "JMESPath function '%s': "
	invalidArgumentTypeError = errorPrefix + "argument #%d is not of type %s"
	genericError             = errorPrefix + "%s"
	argOutOfBoundsError      = errorPrefix + "%d argument is out of bounds (%d)"
	nonIntRoundError         = errorPrefix + "Non-integer argument(s) passed for round off"
)

func formatError(format string, function string, values ...any) error {
	return fmt.Errorf(format, append([]any{function}, values...)...)
}

// fn declares a function whose arguments each take one type.
func fn(name string, handler jmespath.JpFunction, types ...jmespath.JpType) jmespath.FunctionEntry {
	args := make([]jmespath.ArgSpec, 0, len(types))
	for _, t := range types {
		args = append(args, jmespath.ArgSpec{Types: []jmespath.JpType{t}})
	}
	return jmespath.FunctionEntry{Name: name, Arguments: args, Handler: handler}
}

// validateArg is Kyverno's check of one argument's Go kind.
func validateArg(f string, arguments []any, index int, expected reflect.Kind) (reflect.Value, error) {
	if index >= len(arguments) {
		return reflect.Value{}, formatError(argOutOfBoundsError, f, index+1, len(arguments))
	}
	if arguments[index] == nil {
		return reflect.Value{}, formatError(invalidArgumentTypeError, f, index+1, expected.String())
	}
	arg := reflect.ValueOf(arguments[index])
	if arg.Type().Kind() != expected {
		return reflect.Value{}, formatError(invalidArgumentTypeError, f, index+1, expected.String())
	}
	return arg, nil
}

// stringArgs returns the first n arguments of f as strings, checked as
// Kyverno checks them.
func stringArgs(f string, arguments []any, n int) ([]string, error) {
	out := make([]string, 0, n)
	for i := range n {
		v, err := validateArg(f, arguments, i, reflect.String)
		if err != nil {
			return nil, err
		}
		out = append(out, v.String())
	}
	return out, nil
}

// intNumber is number as an int, if it is one.
func intNumber(number float64) (int, error) {
	if math.IsInf(number, 0) || math.IsNaN(number) || math.Trunc(number) != number {
		return 0, fmt.Errorf("expected an integer number but got: %g", number)
	}
	i := int(number)
	if float64(i) != number {
		return 0, fmt.Errorf("number is outside the range of integer numbers: %g", number)
	}
	return i, nil
}
