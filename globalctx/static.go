package globalctx

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
	"github.com/sprout-gitops/sprout/celenv"
)

// Static serves GlobalContextEntries from data given up front, for
// evaluating policies offline (sprout render, sprout test): nothing is
// listed, watched or called. Filled before its first read, it is then only
// read, and safe for concurrent use.
type Static struct {
	entries map[string]*entry
}

var _ celenv.GlobalContext = (*Static)(nil)

// NewStatic returns a Static serving no entry.
func NewStatic() *Static {
	return &Static{entries: map[string]*entry{}}
}

// AddEntry serves gce as the controller serves it, from objs instead of
// the cluster: a kubernetesResource entry holds those of objs of its
// resource (guessed from their kind, as kubectl guesses a kind it has no
// discovery for) and namespace, in the controller's order, and its
// projections of them. An apiCall entry is not called: reading it is an
// error saying so. An invalid entry is an error naming its field.
func (s *Static) AddEntry(gce *v2beta1.GlobalContextEntry, objs []*unstructured.Unstructured) error {
	name := v2beta1.Kind + " " + gce.Name
	if errs := gce.Validate(); len(errs) > 0 {
		return fmt.Errorf("%s: %w", name, errs.ToAggregate())
	}
	if _, dup := s.entries[gce.Name]; dup {
		return fmt.Errorf("%s: given twice", name)
	}
	e := newEntry(gce)
	if r := gce.Spec.KubernetesResource; r != nil {
		e.set(objectsOf(objs, r), nil)
	} else {
		e.set(nil, fmt.Errorf("%s: an apiCall entry is not called offline: give its data in a kyverno-test.yaml's globalContextEntries", name))
	}
	s.entries[gce.Name] = e
	return nil
}

// AddMock serves value as the entry called name holds it, as Kyverno's CLI
// serves a kyverno-test.yaml's globalContextEntries: globalContext.Get
// with a projection reads that key of value.
func (s *Static) AddMock(name string, value any) error {
	if _, dup := s.entries[name]; dup {
		return fmt.Errorf("%q: given twice", name)
	}
	e := &entry{name: name, loaded: make(chan struct{}), stop: func() {}}
	e.data, e.projected = value, map[string]any{}
	if m, ok := value.(map[string]any); ok {
		e.projected = m
	}
	e.once.Do(func() { close(e.loaded) })
	s.entries[name] = e
	return nil
}

// Get returns the data of entry name, or of its projection; found is false
// when no entry has the name, as in the controller.
func (s *Static) Get(ctx context.Context, name, projection string) (any, bool, error) {
	e, ok := s.entries[name]
	if !ok {
		return nil, false, nil
	}
	v, err := e.get(ctx, projection)
	return v, true, err
}

// objectsOf is what a kubernetesResource entry of r holds of objs: a list
// ordered by namespace and name, as resourceSource lists the cluster's.
func objectsOf(objs []*unstructured.Unstructured, r *v2beta1.KubernetesResource) []any {
	var matched []*unstructured.Unstructured
	for _, o := range objs {
		gvr, _ := meta.UnsafeGuessKindToResource(o.GroupVersionKind())
		if gvr == r.GVR() && (r.Namespace == "" || o.GetNamespace() == r.Namespace) {
			matched = append(matched, o)
		}
	}
	slices.SortFunc(matched, func(a, b *unstructured.Unstructured) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	out := make([]any, 0, len(matched))
	for _, o := range matched {
		out = append(out, o.Object)
	}
	return out
}
