package lib

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"sigs.k8s.io/yaml"

	"github.com/sprout-gitops/sprout/celenv/celjson"
	"github.com/sprout-gitops/sprout/internal/yamlbudget"
)

// yamlType is the CEL type of the yaml variable.
var yamlType = cel.OpaqueType("yaml.Yaml")

// yamlLibrary declares Kyverno's yaml library:
//
//	yaml.parse(string) -> dyn   // 'replicas: 2' → {"replicas": 2.0}
//
// The text goes through JSON, as with sigs.k8s.io/yaml: numbers are doubles
// and map keys strings. Only the first document of a stream is read. The text
// may have at most MaxParseBytes, and expand through aliases to at most
// celjson.MaxValueBytes (counted by yamlbudget: a value's bytes and 24 for each
// value, so at most 131,072 values); the parser also refuses nesting
// deeper than it can walk.
func yamlLibrary() cel.EnvOption {
	return namespaceLibrary("yaml", yamlType,
		cel.Function("parse", cel.MemberOverload("yaml_parse_string",
			[]*cel.Type{yamlType, cel.StringType}, cel.DynType, cel.BinaryBinding(yamlParse))),
	)
}

func yamlParse(_, text ref.Val) ref.Val {
	s, ok := text.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(text)
	}
	if err := checkParseSize("yaml.parse", s); err != nil {
		return err
	}
	// Counted before the parser expands anything: its own guard counts
	// values, and an anchor naming a long string passes it.
	if err := yamlbudget.CheckString(string(s), celjson.MaxValueBytes); err != nil {
		return types.WrapErr(fmt.Errorf("yaml.parse: %w", err))
	}
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return types.WrapErr(fmt.Errorf("yaml.parse: %w", err))
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}
