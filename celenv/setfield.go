package celenv

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sprout-gitops/sprout/celenv/celjson"
)

// setFieldLibrary declares obj.setField(path, value), a Sprout extension
// proposed with the GeneratingPolicy design: it returns a copy of obj with
// the dot-separated path set to value, creating missing maps on the way, as
// in source.setField("metadata.namespace", ns). obj itself is unchanged.
func setFieldLibrary() cel.EnvOption {
	return cel.Function("setField",
		cel.MemberOverload("dyn_setField_string_dyn", []*cel.Type{cel.DynType, cel.StringType, cel.DynType}, cel.DynType,
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				path, ok := args[1].(types.String)
				if !ok {
					return types.NewErr("setField: the path must be a string")
				}
				out, err := setField(args[0], string(path), args[2])
				if err != nil {
					return types.NewErr("setField(%q): %v", string(path), err)
				}
				return types.DefaultTypeAdapter.NativeToValue(out)
			})))
}

func setField(objVal ref.Val, path string, valueVal ref.Val) (map[string]any, error) {
	obj, err := celjson.Convert(objVal)
	if err != nil {
		return nil, err
	}
	m, ok := obj.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("can only set fields of a map, not %s", objVal.Type().TypeName())
	}
	value, err := celjson.Convert(valueVal)
	if err != nil {
		return nil, err
	}
	if path == "" || strings.HasPrefix(path, ".") || strings.HasSuffix(path, ".") || strings.Contains(path, "..") {
		return nil, fmt.Errorf("the path must be dot-separated field names")
	}
	out := runtime.DeepCopyJSON(m)
	fields := strings.Split(path, ".")
	cur := out
	for i, f := range fields[:len(fields)-1] {
		next, ok := cur[f].(map[string]any)
		if !ok {
			if cur[f] != nil {
				return nil, fmt.Errorf("%s is not a map", strings.Join(fields[:i+1], "."))
			}
			next = map[string]any{}
			cur[f] = next
		}
		cur = next
	}
	cur[fields[len(fields)-1]] = value
	return out, nil
}
