package celenv

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// yamlType is the CEL type of the yaml variable.
var yamlType = cel.OpaqueType("yaml.Yaml")

// MaxYAMLNodes bounds the values a document read by yaml.parse may expand to
// through its aliases: the most a document of MaxParseBytes without aliases
// can have, so aliases make no document larger than text can.
const MaxYAMLNodes = MaxParseBytes / 4

// yamlLibrary declares Kyverno's yaml library:
//
//	yaml.parse(string) -> dyn   // 'replicas: 2' → {"replicas": 2.0}
//
// The text goes through JSON, as with sigs.k8s.io/yaml: numbers are doubles
// and map keys strings. Only the first document of a stream is read. The text
// may have at most MaxParseBytes, and expand through aliases to at most
// MaxYAMLNodes values; the parser also refuses nesting deeper than it can
// walk.
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
	if err := checkAliases(string(s)); err != nil {
		return types.WrapErr(fmt.Errorf("yaml.parse: %w", err))
	}
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return types.WrapErr(fmt.Errorf("yaml.parse: %w", err))
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

// checkAliases refuses a document whose aliases expand it past MaxYAMLNodes,
// counting before anything is expanded. The parser's own guard allows a
// small anchor repeated often enough to build millions of values. Text
// without a '*' has no alias and is not read twice.
func checkAliases(s string) error {
	if !strings.Contains(s, "*") {
		return nil
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal([]byte(s), &doc); err != nil {
		// The parser proper is another: what this one cannot read, it may
		// read, with aliases uncounted.
		return fmt.Errorf("its aliases cannot be counted: %w", err)
	}
	sizes := map[*yamlv3.Node]int{}
	if n := expandedNodes(&doc, sizes, 0); n > MaxYAMLNodes {
		return fmt.Errorf("its aliases expand it to more than %d values, the limit", MaxYAMLNodes)
	}
	return nil
}

// expandedNodes counts the nodes under n with every alias replaced by what
// it names, remembering the count of each node (sizes) so that each is
// counted once. It stops early past MaxYAMLNodes, and at a depth the parser
// refuses anyway (an alias inside its own anchor).
func expandedNodes(n *yamlv3.Node, sizes map[*yamlv3.Node]int, depth int) int {
	if size, ok := sizes[n]; ok {
		return size
	}
	if depth > 10000 {
		return MaxYAMLNodes + 1
	}
	size := 1
	if n.Kind == yamlv3.AliasNode && n.Alias != nil {
		size = expandedNodes(n.Alias, sizes, depth+1)
	}
	for _, c := range n.Content {
		if size > MaxYAMLNodes {
			break
		}
		size += expandedNodes(c, sizes, depth+1)
	}
	sizes[n] = size
	return size
}
