// Package manifest reads Kubernetes objects from YAML and creates them in a
// cluster, for the demo and tests (kubectl apply, without kubectl).
package manifest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/sprout-gitops/sprout/internal/yamlbudget"
)

// Parse reads every object of a multi-document YAML or JSON stream. A
// document whose aliases expand it past yamlbudget.ForText of its size is
// an error naming it, before anything is expanded.
func Parse(data []byte) ([]*unstructured.Unstructured, error) {
	if err := checkAliases(data); err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		raw.Raw = bytes.TrimSpace(raw.Raw)
		if len(raw.Raw) == 0 || string(raw.Raw) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, u)
	}
}

// checkAliases counts what each document of data expands to through its
// aliases, split as the YAML decoder splits them, so the indices in its
// errors are the decoder's. The files read here (triggers, context objects,
// expected results) may be far larger than a policy, so each document's
// limit grows with its size. Data without an alias is not split.
func checkAliases(data []byte) error {
	if !yamlbudget.MayHaveAliases(data) {
		return nil
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err == nil {
			err = yamlbudget.Check(doc, yamlbudget.ForText(len(doc)))
		}
		if err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
	}
}

// Applier writes objects with server-side apply, as `kubectl apply
// --server-side` would, under its own field manager.
type Applier struct {
	client dynamic.Interface
	mapper meta.ResettableRESTMapper
}

// NewApplier returns an Applier for the cluster at cfg.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{client: client, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))}, nil
}

// Resource returns the client for obj's kind, in obj's namespace when namespaced.
func (a *Applier) Resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	m, err := a.mapping(obj)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.client.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return a.client.Resource(m.Resource), nil
}

// AllNamespaces returns the client for obj's kind across all namespaces.
func (a *Applier) AllNamespaces(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	m, err := a.mapping(obj)
	if err != nil {
		return nil, err
	}
	return a.client.Resource(m.Resource), nil
}

// mapping finds obj's resource, refreshing discovery once for kinds it has
// not seen (a CRD installed a moment ago).
func (a *Applier) mapping(obj *unstructured.Unstructured) (*meta.RESTMapping, error) {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}

// Apply writes every object.
func (a *Applier) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, obj := range objs {
		r, err := a.Resource(obj)
		if err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		force := true
		if _, err := r.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "sprout-demo", Force: &force}); err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}
