package celenv

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// generatorType is the CEL type of the generator variable.
var generatorType = cel.OpaqueType("generator.Context")

// generatorLibrary declares generator.Apply and generator.apply. Cluster
// policies call them with a namespace and a list; namespaced policies only with
// a list, so the two-argument form is a compile error there. ApplyAll is the
// spelling of the original proposal and is kept as an alias.
func generatorLibrary(namespaced bool) cel.EnvOption {
	opts := []cel.EnvOption{cel.Variable(varGenerator, generatorType)}
	for _, name := range []string{"Apply", "apply", "ApplyAll"} {
		var overload cel.FunctionOpt
		if namespaced {
			overload = cel.MemberOverload("generator_"+name+"_list",
				[]*cel.Type{generatorType, cel.ListType(cel.DynType)}, cel.BoolType,
				cel.BinaryBinding(func(g, list ref.Val) ref.Val {
					return g.(*generation).record("", list)
				}))
		} else {
			overload = cel.MemberOverload("generator_"+name+"_string_list",
				[]*cel.Type{generatorType, cel.StringType, cel.ListType(cel.DynType)}, cel.BoolType,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					ns, ok := args[1].(types.String)
					if !ok {
						return types.NewErr("generator.%s: namespace must be a string, got %s", name, args[1].Type().TypeName())
					}
					return args[0].(*generation).record(string(ns), args[2])
				}))
		}
		opts = append(opts, cel.Function(name, overload))
	}
	return cel.Lib(libraryOf(opts))
}

// libraryOf wraps plain options as a cel.Library.
type libraryOf []cel.EnvOption

func (l libraryOf) CompileOptions() []cel.EnvOption     { return l }
func (l libraryOf) ProgramOptions() []cel.ProgramOption { return nil }

// generation collects what generator.Apply is asked to generate during one
// evaluation. It is the value bound to the generator variable; it never writes.
type generation struct {
	namespace string // the namespace a namespaced policy is confined to
	objects   []*unstructured.Unstructured
}

var _ ref.Val = (*generation)(nil)

// record appends every object of list, with namespace set (when given),
// expanding nested lists and List-shaped objects into their items.
func (g *generation) record(namespace string, list ref.Val) ref.Val {
	if g.namespace != "" {
		namespace = g.namespace
	}
	values, err := toJSON(list)
	if err != nil {
		return types.NewErr("generator.Apply: %v", err)
	}
	if err := g.add(namespace, values, "list"); err != nil {
		return types.NewErr("generator.Apply: %v", err)
	}
	return types.True
}

func (g *generation) add(namespace string, v any, path string) error {
	switch v := v.(type) {
	case []any:
		for i, item := range v {
			if err := g.add(namespace, item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if items, ok := v["items"].([]any); ok && isListShaped(v) {
			return g.add(namespace, items, path+".items")
		}
		obj := &unstructured.Unstructured{Object: v}
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" || obj.GetName() == "" {
			return fmt.Errorf("%s: an object needs apiVersion, kind and metadata.name", path)
		}
		if namespace != "" {
			obj.SetNamespace(namespace)
		}
		g.objects = append(g.objects, obj)
		return nil
	case nil:
		return nil
	default:
		return fmt.Errorf("%s: expected an object or a list of objects, got %T", path, v)
	}
}

// isListShaped tells a List (as resource.List returns it) from an object that
// happens to have an items field: a List has no name and a kind ending in List.
func isListShaped(m map[string]any) bool {
	kind, _ := m["kind"].(string)
	meta, _ := m["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	return name == "" && (kind == "" || strings.HasSuffix(kind, "List"))
}

func (g *generation) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("generator cannot be converted")
}
func (g *generation) ConvertToType(t ref.Type) ref.Val {
	return types.NewErr("generator cannot be converted to %s", t.TypeName())
}
func (g *generation) Equal(other ref.Val) ref.Val { return types.Bool(g == other) }
func (g *generation) Type() ref.Type              { return generatorType }
func (g *generation) Value() any                  { return g }
