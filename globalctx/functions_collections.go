package globalctx

import (
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/kyverno/go-jmespath"
)

// collectionFunctions read and build objects and arrays, as Kyverno's do.
func collectionFunctions() []jmespath.FunctionEntry {
	return []jmespath.FunctionEntry{
		{Name: "lookup", Handler: jpLookup, Arguments: []jmespath.ArgSpec{
			{Types: []jmespath.JpType{jpObject, jpArray}}, {Types: []jmespath.JpType{jpString, jpNumber}}}},
		{Name: "items", Handler: jpItems, Arguments: []jmespath.ArgSpec{
			{Types: []jmespath.JpType{jpObject, jpArray}}, {Types: []jmespath.JpType{jpString}}, {Types: []jmespath.JpType{jpString}}}},
		fn("object_from_lists", jpObjectFromLists, jpArray, jpArray),
	}
}

func jpLookup(arguments []any) (any, error) {
	switch input := arguments[0].(type) {
	case map[string]any:
		key, ok := arguments[1].(string)
		if !ok {
			return nil, formatError(invalidArgumentTypeError, "lookup", 2, "String")
		}
		return input[key], nil
	case []any:
		key, ok := arguments[1].(float64)
		if !ok {
			return nil, formatError(invalidArgumentTypeError, "lookup", 2, "Number")
		}
		i, err := intNumber(key)
		if err != nil {
			return nil, fmt.Errorf("JMESPath function 'lookup': argument #2: %s", err.Error())
		}
		if i < 0 || i > len(input)-1 {
			return nil, nil
		}
		return input[i], nil
	}
	return nil, formatError(invalidArgumentTypeError, "lookup", 1, "Object or Array")
}

func jpItems(arguments []any) (any, error) {
	keyName, ok := arguments[1].(string)
	if !ok {
		return nil, formatError(invalidArgumentTypeError, "items", 2, "String")
	}
	valName, ok := arguments[2].(string)
	if !ok {
		return nil, formatError(invalidArgumentTypeError, "items", 3, "String")
	}
	switch input := arguments[0].(type) {
	case map[string]any:
		keys := make([]string, 0, len(input))
		for key := range input {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		out := make([]map[string]any, 0, len(input))
		for _, key := range keys {
			out = append(out, map[string]any{keyName: key, valName: input[key]})
		}
		return out, nil
	case []any:
		out := make([]map[string]any, 0, len(input))
		for i, value := range input {
			out = append(out, map[string]any{keyName: float64(i), valName: value})
		}
		return out, nil
	}
	return nil, formatError(invalidArgumentTypeError, "items", 1, "Object or Array")
}

func jpObjectFromLists(arguments []any) (any, error) {
	keys, ok := arguments[0].([]any)
	if !ok {
		return nil, formatError(invalidArgumentTypeError, "object_from_lists", 1, "Array")
	}
	values, ok := arguments[1].([]any)
	if !ok {
		return nil, formatError(invalidArgumentTypeError, "object_from_lists", 2, "Array")
	}
	out := map[string]any{}
	for i, k := range keys {
		key, err := ifaceToString(k)
		if err != nil {
			return nil, formatError(invalidArgumentTypeError, "object_from_lists", 1, "StringArray")
		}
		out[key] = nil
		if i < len(values) {
			out[key] = values[i]
		}
	}
	return out, nil
}

// ifaceToString is Kyverno's reading of a scalar as a string: numbers with
// float32 precision, as Kyverno formats them.
func ifaceToString(v any) (string, error) {
	switch i := v.(type) {
	case int:
		return strconv.Itoa(i), nil
	case float64:
		return strconv.FormatFloat(i, 'f', -1, 32), nil
	case float32:
		return strconv.FormatFloat(float64(i), 'f', -1, 32), nil
	case string:
		return i, nil
	case bool:
		return strconv.FormatBool(i), nil
	}
	return "", errors.New("error, undefined type cast")
}

// WildcardMatch reports whether s matches pattern, where * matches any run
// of characters and ? any one, as Kyverno's wildcards (JMESPath's
// pattern_match here, and the selectors of sprout test). It backtracks
// only to the last star, so its time is linear in their product at worst.
func WildcardMatch(pattern, s string) bool {
	p, str := []rune(pattern), []rune(s)
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(str) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == str[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
