package evaluate

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/cluster"
)

// restMapper maps the kinds a test names, as kinds.Kinds would.
type restMapper struct{ *meta.DefaultRESTMapper }

func (m restMapper) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	return m.RESTMapping(gvk.GroupKind(), gvk.Version)
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// fakeCaches serves stores of cluster objects, as the core's informers
// do, and counts what it is asked.
type fakeCaches struct {
	stores map[schema.GroupVersionResource]cache.Store
	asked  []string // scope/resource, in order
}

func (f *fakeCaches) cache(_ context.Context, scope string, gvr schema.GroupVersionResource) (cache.Store, error) {
	f.asked = append(f.asked, scope+"/"+gvr.Resource)
	if s, ok := f.stores[gvr]; ok {
		return s, nil
	}
	return nil, errors.New(gvr.Resource + ": not watched")
}

// cached returns a store holding objs as the informers hold them.
func cached(t *testing.T, objs ...*unstructured.Unstructured) cache.Store {
	t.Helper()
	s := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, u := range objs {
		o, err := cluster.Triggers.FromList(u)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func configMap(namespace, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetLabels(labels)
	return u
}
