package lib

import (
	"encoding/json"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/sprout-gitops/sprout/celenv/celjson"
)

// jsonType is the CEL type of the json variable.
var jsonType = cel.OpaqueType("json.Json")

// jsonLibrary declares Kyverno's json library:
//
//	json.unmarshal(string) -> dyn   // '{"a": 1}' → {"a": 1.0}
//	json.marshal(dyn) -> string     // {"a": 1} → '{"a":1}'
//
// As in Kyverno, every JSON number unmarshals to a double. The text may have
// at most MaxParseBytes; json.marshal's value at most celjson.MaxValueBytes.
func jsonLibrary() cel.EnvOption {
	return namespaceLibrary("json", jsonType,
		cel.Function("unmarshal", cel.MemberOverload("json_unmarshal_string",
			[]*cel.Type{jsonType, cel.StringType}, cel.DynType, cel.BinaryBinding(jsonUnmarshal))),
		cel.Function("marshal", cel.MemberOverload("json_marshal_dyn",
			[]*cel.Type{jsonType, cel.DynType}, cel.StringType, cel.BinaryBinding(jsonMarshal))),
	)
}

func jsonUnmarshal(_, text ref.Val) ref.Val {
	s, ok := text.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(text)
	}
	if err := checkParseSize("json.unmarshal", s); err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return types.WrapErr(fmt.Errorf("json.unmarshal: %w", err))
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

// checkParseSize refuses a text over MaxParseBytes before it is parsed.
func checkParseSize(function string, s types.String) ref.Val {
	if len(s) > MaxParseBytes {
		return types.NewErr("%s: the text has %d bytes, over the limit of %d", function, len(s), MaxParseBytes)
	}
	return nil
}

func jsonMarshal(_, value ref.Val) ref.Val {
	v, err := celjson.Convert(value)
	if err != nil {
		return types.WrapErr(fmt.Errorf("json.marshal: %w", err))
	}
	out, err := json.Marshal(v)
	if err != nil {
		return types.WrapErr(fmt.Errorf("json.marshal: %w", err))
	}
	return types.String(out)
}
