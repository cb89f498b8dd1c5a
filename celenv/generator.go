package celenv

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sprout-gitops/sprout/celenv/celjson"
	"github.com/sprout-gitops/sprout/celenv/lib"
)

// generatorType is the CEL type of the generator variable.
var generatorType = cel.OpaqueType("generator.Context")

// generatorLibrary declares generator.Apply and generator.apply, called with
// a namespace and a list of objects (or one object). A namespaced policy may
// name only its own namespace, as in Kyverno, or leave it out. ApplyAll is the spelling of the original proposal and
// is kept as an alias.
func generatorLibrary(namespaced bool) cel.EnvOption {
	opts := []cel.EnvOption{cel.Variable(varGenerator, generatorType)}
	for _, name := range []string{"Apply", "apply", "ApplyAll"} {
		overloads := []cel.FunctionOpt{cel.MemberOverload("generator_"+name+"_string_dyn",
			[]*cel.Type{generatorType, cel.StringType, cel.DynType}, cel.BoolType,
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				ns, ok := args[1].(types.String)
				if !ok {
					return types.NewErr("generator.%s: namespace must be a string, got %s", name, args[1].Type().TypeName())
				}
				g := args[0].(*generation)
				if g.namespace != "" && string(ns) != g.namespace {
					// Kyverno's words for the same refusal.
					return types.NewErr("cross-namespace generation denied: policy in %q cannot generate into %q", g.namespace, string(ns))
				}
				return g.record(string(ns), args[2])
			}))}
		if namespaced {
			// A namespaced policy may leave the namespace out: it has one.
			overloads = append(overloads, cel.MemberOverload("generator_"+name+"_dyn",
				[]*cel.Type{generatorType, cel.DynType}, cel.BoolType,
				cel.BinaryBinding(func(g, list ref.Val) ref.Val {
					return g.(*generation).record("", list)
				})))
		}
		opts = append(opts, cel.Function(name, overloads...))
	}
	return lib.Library(opts...)
}

// generation collects what generator.Apply is asked to generate during one
// evaluation. It is the value bound to the generator variable; it never writes.
type generation struct {
	namespace string // the namespace a namespaced policy is confined to
	reads     *reads // what the evaluation read, to trace clones to their source
	scopes    Scopes // tells cluster-scoped kinds, which get no namespace
	objects   []Generated
	index     map[objectKey]int // position in objects, so a repeat replaces
	// lastBytes is the size of what the last generator.Apply copied, for
	// its cost: measured while copying, not walked again.
	lastBytes uint64
	// budget is what the evaluation has left to spend.
	budget evaluationBudget
}

// Generated is one object a policy wants.
type Generated struct {
	// Object is the desired object, stripped of server-set metadata.
	Object *unstructured.Unstructured
	// ClonedFrom names the cluster object it was copied from, when it
	// carries a resourceVersion (it came from resource.Get or resource.List);
	// nil for data. Its UID is empty when the copy dropped the source's.
	ClonedFrom *ObjectRef
}

// ObjectRef names an object in the cluster.
type ObjectRef struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        string
}

type objectKey struct{ apiVersion, kind, namespace, name string }

var _ ref.Val = (*generation)(nil)

// record appends every object of v, with namespace set (when given). v is an
// object or a list whose elements are objects or List objects (as
// resource.List returns them), which are expanded into their items.
func (g *generation) record(namespace string, v ref.Val) ref.Val {
	value, size, err := celjson.ConvertSized(v, g.budget.charge)
	g.lastBytes = size
	if err != nil {
		return types.NewErr("generator.Apply: %v", err)
	}
	if list, ok := value.([]any); ok {
		for i, item := range list {
			if _, nested := item.([]any); nested {
				return types.NewErr("generator.Apply: list[%d] is a list, not an object: flatten it (.flatten()) or pass a List object", i)
			}
			if err := g.add(namespace, item, fmt.Sprintf("list[%d]", i)); err != nil {
				return types.NewErr("generator.Apply: %v", err)
			}
		}
		return types.True
	}
	if err := g.add(namespace, value, "object"); err != nil {
		return types.NewErr("generator.Apply: %v", err)
	}
	return types.True
}

// add records one object, or the items of a List object.
func (g *generation) add(namespace string, v any, path string) error {
	obj, ok := v.(map[string]any)
	if !ok {
		if v == nil {
			return nil
		}
		return fmt.Errorf("%s: expected an object, got %T", path, v)
	}
	if items, ok := obj["items"].([]any); ok && isListShaped(obj) {
		for i, item := range items {
			if err := g.add(namespace, item, fmt.Sprintf("%s.items[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if g.namespace != "" {
		namespace = g.namespace
	}
	u := &unstructured.Unstructured{Object: obj}
	if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
		return fmt.Errorf("%s: an object needs apiVersion, kind and metadata.name", path)
	}
	out := Generated{Object: u}
	// As in Kyverno's generator library, an object is a clone when it
	// carries a resourceVersion, that is when it was read from the cluster:
	// one assembled field by field is data, whatever it copied.
	known := false // the source was read, so where it lives is known
	if u.GetResourceVersion() != "" {
		uid := string(u.GetUID())
		src, ok := g.reads.seen[uid]
		known = ok && uid != ""
		if !known {
			src = ObjectRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), UID: uid}
		}
		out.ClonedFrom = &src
		dropTracking(u)
		// The source's owners are not the clone's: in another namespace
		// the garbage collector takes them for absent and deletes it.
		unstructured.RemoveNestedField(u.Object, "metadata", "ownerReferences")
	}
	sanitize(u)
	if g.namespace != "" && u.GetNamespace() != "" && u.GetNamespace() != g.namespace {
		return fmt.Errorf("%s: %s %s/%s is outside namespace %q, the only one a NamespacedGeneratingPolicy may write to",
			path, u.GetKind(), u.GetNamespace(), u.GetName(), g.namespace)
	}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	if err := g.scope(u); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if src := out.ClonedFrom; known && src.Kind == u.GetKind() && src.APIVersion == u.GetAPIVersion() &&
		src.Namespace == u.GetNamespace() && src.Name == u.GetName() {
		// A clone onto its own source, as when the source namespace is
		// also a target: it is the source already, so nothing is wanted of
		// it, and it is not the policy's to write or prune.
		return nil
	}
	key := objectKey{u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName()}
	if g.index == nil {
		g.index = map[objectKey]int{}
	}
	if i, ok := g.index[key]; ok {
		g.objects[i] = out // the same object generated twice: the last one wins
		return nil
	}
	g.index[key] = len(g.objects)
	g.objects = append(g.objects, out)
	return nil
}

// truncate forgets the objects recorded after the first n.
func (g *generation) truncate(n int) {
	for _, o := range g.objects[n:] {
		u := o.Object
		delete(g.index, objectKey{u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName()})
	}
	g.objects = g.objects[:n]
}

// scope removes the namespace of an object of a cluster-scoped kind; a
// namespaced policy may not generate such objects at all.
func (g *generation) scope(u *unstructured.Unstructured) error {
	if g.scopes == nil {
		return nil
	}
	namespaced, err := g.scopes.IsNamespaced(u.GroupVersionKind())
	if meta.IsNoMatchError(err) {
		// A kind the API server does not serve: writing it will fail, for
		// this object alone; the policy's other objects are still generated.
		return nil
	}
	if err != nil || namespaced {
		return err
	}
	if g.namespace != "" {
		return fmt.Errorf("%s %s is cluster-scoped: a NamespacedGeneratingPolicy may only write to namespace %q", u.GetKind(), u.GetName(), g.namespace)
	}
	u.SetNamespace("")
	return nil
}

// sanitize removes what the API server sets on an object, so a clone of a
// cluster object can be applied as a new one. ownerReferences an object
// the policy builds are kept, as Kyverno keeps them: a policy names the
// trigger as owner so that deleting it deletes what it generated.
func sanitize(u *unstructured.Unstructured) {
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
		"deletionGracePeriodSeconds", "managedFields", "selfLink", "finalizers"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	delete(u.Object, "status")
}

// trackingPrefixes start the labels and annotations by which other tools
// (Flux's kustomize- and helm-controller, Argo CD) tell the objects they
// manage; trackingAnnotations are whole keys (kubectl apply's record).
var (
	trackingPrefixes    = []string{"kustomize.toolkit.fluxcd.io/", "helm.toolkit.fluxcd.io/", "argocd.argoproj.io/"}
	trackingAnnotations = []string{"kubectl.kubernetes.io/last-applied-configuration"}
)

// dropTracking removes from a clone the labels and annotations by which
// another tool tracks its source: copied, they would make Flux or Argo CD
// take the copy for one of theirs, and claim or prune it. An object a
// policy builds itself keeps what its author wrote.
func dropTracking(u *unstructured.Unstructured) {
	md, _ := u.Object["metadata"].(map[string]any)
	for _, field := range []string{"labels", "annotations"} {
		m, ok := md[field].(map[string]any)
		if !ok {
			continue
		}
		// A new map: the source's may be shared with what the evaluation read.
		kept := make(map[string]any, len(m))
		for k, v := range m {
			if !slices.ContainsFunc(trackingPrefixes, func(p string) bool { return strings.HasPrefix(k, p) }) &&
				(field != "annotations" || !slices.Contains(trackingAnnotations, k)) {
				kept[k] = v
			}
		}
		if len(kept) == 0 {
			delete(md, field)
		} else {
			md[field] = kept
		}
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
