package globalctx

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/kyverno/go-jmespath"
	"sigs.k8s.io/yaml"

	"github.com/sprout-gitops/sprout/internal/yamlbudget"
)

// kyvernoFunctions are Kyverno's JMESPath functions (its
// pkg/engine/jmespath) that are pure and bounded, under Kyverno's names,
// with its argument types, results and error messages. docs/cel.md lists
// those left out, and why.
func kyvernoFunctions() []jmespath.FunctionEntry {
	out := []jmespath.FunctionEntry{
		fn("replace", jpReplace, jpString, jpString, jpString, jpNumber),
		fn("split", jpSplit, jpString, jpString),
		fn("label_match", jpLabelMatch, jpObject, jpObject),
		fn("to_boolean", jpToBoolean, jpString),
		fn("round", jpRound, jpNumber, jpNumber),
		fn("base64_decode", jpBase64Decode, jpString),
		fn("truncate", jpTruncate, jpString, jpNumber),
		fn("parse_json", jpParseJSON, jpString),
		fn("parse_yaml", jpParseYAML, jpString),
		fn("sha256", digest(sha256.New), jpString),
		fn("sha1", digest(sha1.New), jpString),
		fn("md5", digest(md5.New), jpString),
		fn("x509_decode", jpX509Decode, jpString),
		fn("semver_compare", jpSemverCompare, jpString, jpString),
	}
	for _, f := range stringFunctions {
		types := make([]jmespath.JpType, f.args)
		for i := range types {
			types[i] = jpString
		}
		errName := f.name
		if f.unnamed {
			errName = ""
		}
		out = append(out, fn(f.name, stringsN(errName, f.args, f.do), types...))
	}
	out = append(out, regexFunctions()...)
	out = append(out, collectionFunctions()...)
	out = append(out, timeFunctions()...)
	return append(out, arithmeticFunctions()...)
}

// stringFunctions are Kyverno's functions of strings that cannot fail.
var stringFunctions = []struct {
	name string
	args int
	// unnamed: Kyverno names no function in its errors; neither does Sprout.
	unnamed bool
	do      func(s []string) any
}{
	{name: "compare", args: 2, do: func(s []string) any { return strings.Compare(s[0], s[1]) }},
	{name: "equal_fold", args: 2, do: func(s []string) any { return strings.EqualFold(s[0], s[1]) }},
	{name: "replace_all", args: 3, do: func(s []string) any { return strings.ReplaceAll(s[0], s[1], s[2]) }},
	{name: "to_upper", args: 1, do: func(s []string) any { return strings.ToUpper(s[0]) }},
	{name: "to_lower", args: 1, do: func(s []string) any { return strings.ToLower(s[0]) }},
	{name: "trim", args: 2, do: func(s []string) any { return strings.Trim(s[0], s[1]) }},
	{name: "trim_prefix", args: 2, do: func(s []string) any { return strings.TrimPrefix(s[0], s[1]) }},
	{name: "base64_encode", args: 1, unnamed: true, do: func(s []string) any { return base64.StdEncoding.EncodeToString([]byte(s[0])) }},
	{name: "path_canonicalize", args: 1, do: func(s []string) any { return filepath.Join(s[0]) }},
}

// stringsN is a function of n strings, checked as Kyverno checks them.
func stringsN(name string, n int, f func([]string) any) jmespath.JpFunction {
	return func(arguments []any) (any, error) {
		s, err := stringArgs(name, arguments, n)
		if err != nil {
			return nil, err
		}
		return f(s), nil
	}
}

func jpReplace(arguments []any) (any, error) {
	s, err := stringArgs("replace", arguments, 3)
	if err != nil {
		return nil, err
	}
	n, err := validateArg("replace", arguments, 3, reflect.Float64)
	if err != nil {
		return nil, err
	}
	return strings.Replace(s[0], s[1], s[2], int(n.Float())), nil
}

func jpSplit(arguments []any) (any, error) {
	s, err := stringArgs("split", arguments, 2)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(s[0], s[1])
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

func jpLabelMatch(arguments []any) (any, error) {
	labels, ok := arguments[0].(map[string]any)
	if !ok {
		return nil, formatError(invalidArgumentTypeError, "label_match", 0, "Object")
	}
	match, ok := arguments[1].(map[string]any)
	if !ok {
		return nil, formatError(invalidArgumentTypeError, "label_match", 1, "Object")
	}
	for key, value := range labels {
		if v, ok := match[key]; !ok || !reflect.DeepEqual(v, value) {
			return false, nil
		}
	}
	return true, nil
}

func jpToBoolean(arguments []any) (any, error) {
	s, err := stringArgs("to_boolean", arguments, 1)
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(s[0]) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return nil, formatError(genericError, "to_boolean", fmt.Sprintf("lowercase argument must be 'true' or 'false' (provided: '%s')", s[0]))
}

func jpRound(arguments []any) (any, error) {
	op, err := validateArg("round", arguments, 0, reflect.Float64)
	if err != nil {
		return nil, err
	}
	length, err := validateArg("round", arguments, 1, reflect.Float64)
	if err != nil {
		return nil, err
	}
	digits, err := intNumber(length.Float())
	if err != nil {
		return nil, formatError(nonIntRoundError, "round")
	}
	if digits < 0 {
		return nil, formatError(argOutOfBoundsError, "round")
	}
	shift := math.Pow(10, float64(digits))
	return math.Round(op.Float()*shift) / shift, nil
}

func jpBase64Decode(arguments []any) (any, error) {
	s, err := stringArgs("", arguments, 1)
	if err != nil {
		return nil, err
	}
	decoded, err := base64.StdEncoding.DecodeString(s[0])
	if err != nil {
		return nil, err
	}
	return string(decoded), nil
}

// jpTruncate cuts a string to at most length characters (runes), as
// Kyverno's truncate does.
func jpTruncate(arguments []any) (any, error) {
	s, err := validateArg("truncate", arguments, 0, reflect.String)
	if err != nil {
		return nil, err
	}
	length, err := validateArg("truncate", arguments, 1, reflect.Float64)
	if err != nil {
		return nil, err
	}
	n := int(max(length.Float(), 0))
	runes := []rune(s.String())
	if len(runes) <= n {
		return s.String(), nil
	}
	return string(runes[:n]), nil
}

func jpParseJSON(arguments []any) (any, error) {
	s, err := stringArgs("parse_json", arguments, 1)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal([]byte(s[0]), &out)
	return out, err
}

func jpParseYAML(arguments []any) (any, error) {
	s, err := stringArgs("parse_yaml", arguments, 1)
	if err != nil {
		return nil, err
	}
	// Counted before the parser expands the aliases: its own guard counts
	// values, and an anchor naming a long string passes it.
	if err := yamlbudget.CheckString(s[0], yamlbudget.ForText(len(s[0]))); err != nil {
		return nil, fmt.Errorf("parse_yaml: %w", err)
	}
	data, err := yaml.YAMLToJSON([]byte(s[0]))
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(data, &out)
	return out, err
}

// jpSemverCompare reports whether a version is in a range, as Kyverno
// reads both (blang/semver): a version that does not parse is 0.0.0.
func jpSemverCompare(arguments []any) (any, error) {
	s, err := stringArgs("semver_compare", arguments, 2)
	if err != nil {
		return nil, err
	}
	version, _ := semver.Parse(s[0])
	inRange, err := semver.ParseRange(s[1])
	if err != nil {
		return nil, err
	}
	return inRange(version), nil
}

// digest is a hash function of a string, in hex.
func digest(h func() hash.Hash) jmespath.JpFunction {
	return stringsN("", 1, func(s []string) any {
		d := h()
		d.Write([]byte(s[0]))
		return hex.EncodeToString(d.Sum(nil))
	})
}

// regexFunctions match and replace with Go's regular expressions, whose
// time is linear in the input, and Kyverno's wildcards.
func regexFunctions() []jmespath.FunctionEntry {
	strOrNum := []jmespath.JpType{jpString, jpNumber}
	entry := func(name string, h jmespath.JpFunction, n int) jmespath.FunctionEntry {
		args := []jmespath.ArgSpec{{Types: []jmespath.JpType{jpString}}}
		for range n - 1 {
			args = append(args, jmespath.ArgSpec{Types: strOrNum})
		}
		return jmespath.FunctionEntry{Name: name, Arguments: args, Handler: h}
	}
	return []jmespath.FunctionEntry{
		entry("regex_replace_all", regexReplaceAll("regex_replace_all", false), 3),
		entry("regex_replace_all_literal", regexReplaceAll("regex_replace_all_literal", true), 3),
		entry("regex_match", jpRegexMatch, 2),
		entry("pattern_match", jpPatternMatch, 2),
	}
}

// regexReplaceAll replaces every match of the first argument in the
// second with the third, expanding $1 unless literal.
func regexReplaceAll(name string, literal bool) jmespath.JpFunction {
	return func(arguments []any) (any, error) {
		expr, s, err := patternArgs(name, arguments)
		if err != nil {
			return nil, err
		}
		repl, err := ifaceToString(arguments[2])
		if err != nil {
			return nil, formatError(invalidArgumentTypeError, name, 3, "String or Real")
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, formatError(genericError, name, err.Error())
		}
		if literal {
			return re.ReplaceAllLiteralString(s, repl), nil
		}
		return re.ReplaceAllString(s, repl), nil
	}
}

func jpRegexMatch(arguments []any) (any, error) {
	expr, s, err := patternArgs("regex_match", arguments)
	if err != nil {
		return nil, err
	}
	return regexp.MatchString(expr, s)
}

// jpPatternMatch matches Kyverno's wildcards; its errors name
// regex_match, as Kyverno's do.
func jpPatternMatch(arguments []any) (any, error) {
	pattern, s, err := patternArgs("regex_match", arguments)
	if err != nil {
		return nil, err
	}
	return WildcardMatch(pattern, s), nil
}

// patternArgs reads the pattern and the string, or number, it is matched
// against.
func patternArgs(name string, arguments []any) (string, string, error) {
	pattern, err := validateArg(name, arguments, 0, reflect.String)
	if err != nil {
		return "", "", err
	}
	s, err := ifaceToString(arguments[1])
	if err != nil {
		return "", "", formatError(invalidArgumentTypeError, name, 2, "String or Real")
	}
	return pattern.String(), s, nil
}
