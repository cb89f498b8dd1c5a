package lib

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/sprout-gitops/sprout/celenv/celjson"
)

// transformLibrary declares Kyverno's listObjToMap, under its two spellings:
//
//	listObjToMap(keys, values, keyField, valueField) -> map
//	transform.listObjToMap(keys, values, keyField, valueField) -> map
//
// It pairs the lists element by element: keys[i][keyField] maps to
// values[i][valueField], so
// listObjToMap([{"name": "a"}], [{"v": 1}], "name", "v") is {"a": 1}.
func transformLibrary() cel.EnvOption {
	overload := func(id string) cel.FunctionOpt {
		return cel.Overload(id,
			[]*cel.Type{cel.ListType(cel.DynType), cel.ListType(cel.DynType), cel.StringType, cel.StringType},
			cel.MapType(cel.StringType, cel.DynType),
			cel.FunctionBinding(listObjToMap))
	}
	return cel.Lib(utilityLibrary{compile: []cel.EnvOption{
		cel.Function("listObjToMap", overload("listObjToMap_list_list_string_string")),
		cel.Function("transform.listObjToMap", overload("transform_listObjToMap_list_list_string_string")),
	}})
}

func listObjToMap(args ...ref.Val) ref.Val {
	keys, err := celjson.Convert(args[0])
	if err != nil {
		return types.WrapErr(fmt.Errorf("listObjToMap: %w", err))
	}
	values, err := celjson.Convert(args[1])
	if err != nil {
		return types.WrapErr(fmt.Errorf("listObjToMap: %w", err))
	}
	keyField, valueField := string(args[2].(types.String)), string(args[3].(types.String))
	keyList, _ := keys.([]any)
	valueList, _ := values.([]any)
	if len(keyList) != len(valueList) {
		return types.NewErr("listObjToMap: the lists have %d and %d elements; they must have as many", len(keyList), len(valueList))
	}
	out := make(map[string]any, len(keyList))
	for i := range keyList {
		k, ok := fieldOf(keyList[i], keyField).(string)
		if !ok {
			return types.NewErr("listObjToMap: keys[%d].%s must be a string", i, keyField)
		}
		v := fieldOf(valueList[i], valueField)
		if v == nil {
			return types.NewErr("listObjToMap: values[%d] has no field %s", i, valueField)
		}
		out[k] = v
	}
	return types.DefaultTypeAdapter.NativeToValue(out)
}

// fieldOf is obj[field] when obj is a map, else nil.
func fieldOf(obj any, field string) any {
	m, _ := obj.(map[string]any)
	return m[field]
}
