package celenv

import (
	"context"
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sprout-gitops/sprout/celenv/celjson"
	"github.com/sprout-gitops/sprout/celenv/lib"
)

// Reader serves resource.Get and resource.List. The controller answers from
// its informer caches and records what each policy read; render answers from
// files.
type Reader interface {
	// Get returns one object, or an error (a NotFound API error when absent).
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (map[string]any, error)
	// List returns a List object ({apiVersion, kind, items}) of the objects in
	// namespace ("" for all namespaces) that the selector selects.
	List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) (map[string]any, error)
	// ResourceFor returns the resource that serves a kind.
	ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error)
}

const varResource = "resource"

// resourceType is the CEL type of the resource variable.
var resourceType = cel.OpaqueType("resource.Context")

// resourceLibrary declares resource.Get/get and resource.List/list, by
// apiVersion and resource or by the GVR that resource.ToGVR(apiVersion, kind)
// returns ({group, version, resource}).
func resourceLibrary() cel.EnvOption {
	get := func(args ...ref.Val) ref.Val {
		r := args[0].(*reads)
		return r.get(string(args[1].(types.String)), string(args[2].(types.String)), string(args[3].(types.String)), string(args[4].(types.String)))
	}
	list := func(args ...ref.Val) ref.Val {
		r := args[0].(*reads)
		var selector ref.Val
		if len(args) == 5 {
			selector = args[4]
		}
		return r.list(string(args[1].(types.String)), string(args[2].(types.String)), string(args[3].(types.String)), selector)
	}
	str := cel.StringType
	gvrMap := cel.MapType(str, str)
	opts := []cel.EnvOption{cel.Variable(varResource, resourceType)}
	for _, name := range []string{"Get", "get"} {
		opts = append(opts, cel.Function(name,
			cel.MemberOverload("resource_"+name+"_string_string_string_string",
				[]*cel.Type{resourceType, str, str, str, str}, cel.DynType, cel.FunctionBinding(get)),
			cel.MemberOverload("resource_"+name+"_gvr_string_string",
				[]*cel.Type{resourceType, gvrMap, str, str}, cel.DynType, cel.FunctionBinding(byGVR(get)))))
	}
	for _, name := range []string{"List", "list"} {
		opts = append(opts, cel.Function(name,
			cel.MemberOverload("resource_"+name+"_string_string_string",
				[]*cel.Type{resourceType, str, str, str}, cel.DynType, cel.FunctionBinding(list)),
			cel.MemberOverload("resource_"+name+"_string_string_string_map",
				[]*cel.Type{resourceType, str, str, str, cel.MapType(str, str)}, cel.DynType, cel.FunctionBinding(list)),
			cel.MemberOverload("resource_"+name+"_gvr_string",
				[]*cel.Type{resourceType, gvrMap, str}, cel.DynType, cel.FunctionBinding(byGVR(list))),
			cel.MemberOverload("resource_"+name+"_gvr_string_map",
				[]*cel.Type{resourceType, gvrMap, str, cel.MapType(str, str)}, cel.DynType, cel.FunctionBinding(byGVR(list)))))
	}
	opts = append(opts, cel.Function("ToGVR",
		cel.MemberOverload("resource_ToGVR_string_string", []*cel.Type{resourceType, str, str}, gvrMap,
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				return args[0].(*reads).toGVR(string(args[1].(types.String)), string(args[2].(types.String)))
			}))))
	return lib.Library(opts...)
}

// namespacedResourceLibrary declares the forms Kyverno gives a namespaced
// policy, which name no namespace: the policy's own is read.
//
//	resource.Get(apiVersion, resource, name), resource.Get(gvr, name)
//	resource.List(apiVersion, resource[, labels]), resource.List(gvr[, labels])
func namespacedResourceLibrary() cel.EnvOption {
	get := func(args ...ref.Val) ref.Val {
		r := args[0].(*reads)
		return r.get(string(args[1].(types.String)), string(args[2].(types.String)), r.namespace, string(args[3].(types.String)))
	}
	list := func(args ...ref.Val) ref.Val {
		r := args[0].(*reads)
		var selector ref.Val
		if len(args) == 4 {
			selector = args[3]
		}
		return r.list(string(args[1].(types.String)), string(args[2].(types.String)), r.namespace, selector)
	}
	str := cel.StringType
	gvrMap, labelMap := cel.MapType(str, str), cel.MapType(str, str)
	var opts []cel.EnvOption
	for _, name := range []string{"Get", "get"} {
		opts = append(opts, cel.Function(name,
			cel.MemberOverload("resource_"+name+"_ns_string_string_string",
				[]*cel.Type{resourceType, str, str, str}, cel.DynType, cel.FunctionBinding(get)),
			cel.MemberOverload("resource_"+name+"_ns_gvr_string",
				[]*cel.Type{resourceType, gvrMap, str}, cel.DynType, cel.FunctionBinding(byGVR(get)))))
	}
	for _, name := range []string{"List", "list"} {
		opts = append(opts, cel.Function(name,
			cel.MemberOverload("resource_"+name+"_ns_string_string",
				[]*cel.Type{resourceType, str, str}, cel.DynType, cel.FunctionBinding(list)),
			cel.MemberOverload("resource_"+name+"_ns_string_string_map",
				[]*cel.Type{resourceType, str, str, labelMap}, cel.DynType, cel.FunctionBinding(list)),
			cel.MemberOverload("resource_"+name+"_ns_gvr",
				[]*cel.Type{resourceType, gvrMap}, cel.DynType, cel.FunctionBinding(byGVR(list))),
			cel.MemberOverload("resource_"+name+"_ns_gvr_map",
				[]*cel.Type{resourceType, gvrMap, labelMap}, cel.DynType, cel.FunctionBinding(byGVR(list)))))
	}
	return lib.Library(opts...)
}

// byGVR makes a GVR form of f, a string form: it calls f with the GVR
// spelled out as apiVersion and resource.
func byGVR(f func(...ref.Val) ref.Val) func(...ref.Val) ref.Val {
	return func(args ...ref.Val) ref.Val {
		apiVersion, resource, err := fromGVR(args[1])
		if err != nil {
			return types.NewErr("resource: %v", err)
		}
		return f(append([]ref.Val{args[0], apiVersion, resource}, args[2:]...)...)
	}
}

// reads is the value bound to the resource variable for one evaluation.
type reads struct {
	ctx       context.Context
	reader    Reader
	namespace string // set for namespaced policies: the only namespace they may read
	// seen holds every object read, by UID, so a generated copy can be traced
	// to its source even after setField moved it to another namespace.
	seen map[string]ObjectRef
	// missing names the objects resource.Get did not find.
	missing []string
	// any is set by the first resource.Get or resource.List.
	any bool
}

// remember records obj as read.
func (r *reads) remember(obj map[string]any) {
	u := unstructured.Unstructured{Object: obj}
	uid := string(u.GetUID())
	if uid == "" {
		return
	}
	if r.seen == nil {
		r.seen = map[string]ObjectRef{}
	}
	r.seen[uid] = ObjectRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), UID: uid}
}

var _ ref.Val = (*reads)(nil)

func (r *reads) gvr(apiVersion, resource string) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	if resource == "" {
		return schema.GroupVersionResource{}, fmt.Errorf("resource must not be empty")
	}
	return gv.WithResource(resource), nil
}

func (r *reads) allowed(namespace string) error {
	if r.namespace != "" && namespace != r.namespace {
		return fmt.Errorf("a NamespacedGeneratingPolicy in %q cannot read namespace %q", r.namespace, namespace)
	}
	if r.reader == nil {
		return fmt.Errorf("no cluster to read from")
	}
	return nil
}

func (r *reads) get(apiVersion, resource, namespace, name string) ref.Val {
	r.any = true
	gvr, err := r.gvr(apiVersion, resource)
	if err == nil {
		err = r.allowed(namespace)
	}
	if err != nil {
		return types.NewErr("resource.Get(%q, %q, %q, %q): %v", apiVersion, resource, namespace, name, err)
	}
	obj, err := r.reader.Get(r.ctx, gvr, namespace, name)
	if apierrors.IsNotFound(err) {
		r.missing = append(r.missing, fmt.Sprintf("%s %s/%s", resource, namespace, name))
	}
	if err != nil {
		return types.NewErr("resource.Get(%q, %q, %q, %q): %v", apiVersion, resource, namespace, name, err)
	}
	r.remember(obj)
	return types.DefaultTypeAdapter.NativeToValue(obj)
}

func (r *reads) list(apiVersion, resource, namespace string, selectorVal ref.Val) ref.Val {
	r.any = true
	gvr, err := r.gvr(apiVersion, resource)
	if err == nil {
		err = r.allowed(namespace)
	}
	selector := labels.Everything()
	if err == nil && selectorVal != nil {
		selector, err = labelSelector(selectorVal)
	}
	if err != nil {
		return types.NewErr("resource.List(%q, %q, %q): %v", apiVersion, resource, namespace, err)
	}
	list, err := r.reader.List(r.ctx, gvr, namespace, selector)
	if err != nil {
		return types.NewErr("resource.List(%q, %q, %q): %v", apiVersion, resource, namespace, err)
	}
	items, _ := list["items"].([]any)
	for _, item := range items {
		if m, ok := item.(map[string]any); ok {
			r.remember(m)
		}
	}
	return types.DefaultTypeAdapter.NativeToValue(list)
}

// toGVR answers resource.ToGVR(apiVersion, kind) with {group, version, resource}.
func (r *reads) toGVR(apiVersion, kind string) ref.Val {
	if r.reader == nil {
		return types.NewErr("resource.ToGVR(%q, %q): no cluster to ask", apiVersion, kind)
	}
	gvr, err := r.reader.ResourceFor(schema.FromAPIVersionAndKind(apiVersion, kind))
	if err != nil {
		return types.NewErr("resource.ToGVR(%q, %q): %v", apiVersion, kind, err)
	}
	return types.DefaultTypeAdapter.NativeToValue(map[string]string{"group": gvr.Group, "version": gvr.Version, "resource": gvr.Resource})
}

// fromGVR spells a {group, version, resource} map as apiVersion and resource.
func fromGVR(v ref.Val) (apiVersion, resource ref.Val, err error) {
	m, err := celjson.Convert(v)
	if err != nil {
		return nil, nil, err
	}
	gvr, _ := m.(map[string]any)
	group, _ := gvr["group"].(string)
	version, _ := gvr["version"].(string)
	res, _ := gvr["resource"].(string)
	if version == "" || res == "" {
		return nil, nil, fmt.Errorf("a GVR needs version and resource, got %v", m)
	}
	return types.String(schema.GroupVersion{Group: group, Version: version}.String()), types.String(res), nil
}

// labelSelector turns a CEL map of label values into an equality selector.
func labelSelector(v ref.Val) (labels.Selector, error) {
	m, ok := v.(traits.Mapper)
	if !ok {
		return nil, fmt.Errorf("labels must be a map of strings")
	}
	set := labels.Set{}
	it := m.Iterator()
	for it.HasNext() == types.True {
		k := it.Next()
		val, _ := m.Get(k).(types.String)
		set[fmt.Sprint(k.Value())] = string(val)
	}
	return labels.ValidatedSelectorFromSet(set)
}

func (r *reads) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("resource cannot be converted")
}
func (r *reads) ConvertToType(t ref.Type) ref.Val {
	return types.NewErr("resource cannot be converted to %s", t.TypeName())
}
func (r *reads) Equal(other ref.Val) ref.Val { return types.Bool(r == other) }
func (r *reads) Type() ref.Type              { return resourceType }
func (r *reads) Value() any                  { return r }
