package celenv

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ObjectReader serves resource.Get and resource.List from a fixed set of
// objects, for evaluating policies offline (sprout render). An object's
// resource is guessed from its kind the way kubectl does for unknown kinds
// (ConfigMap → configmaps, NetworkPolicy → networkpolicies).
type ObjectReader struct {
	objects map[schema.GroupVersionResource][]*unstructured.Unstructured
}

var _ Reader = (*ObjectReader)(nil)

// NewObjectReader returns a Reader over objs.
func NewObjectReader(objs []*unstructured.Unstructured) *ObjectReader {
	r := &ObjectReader{objects: map[schema.GroupVersionResource][]*unstructured.Unstructured{}}
	for _, o := range objs {
		if o.GetResourceVersion() == "" {
			// Every object read from a cluster has a resourceVersion, and a
			// copy of one that keeps it is a clone: the objects given stand
			// for cluster objects, so render and the controller agree.
			o = o.DeepCopy()
			o.SetResourceVersion("1")
		}
		gvr, _ := meta.UnsafeGuessKindToResource(o.GroupVersionKind())
		r.objects[gvr] = append(r.objects[gvr], o)
	}
	return r
}

// Get returns the object, or a NotFound error.
func (r *ObjectReader) Get(_ context.Context, gvr schema.GroupVersionResource, namespace, name string) (map[string]any, error) {
	for _, o := range r.objects[gvr] {
		if o.GetNamespace() == namespace && o.GetName() == name {
			return runtime.DeepCopyJSON(o.Object), nil
		}
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

// List returns the selected objects of namespace ("" for all).
func (r *ObjectReader) List(_ context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) (map[string]any, error) {
	return ListOf(gvr, r.objects[gvr], namespace, selector), nil
}

// ListOf builds the List object resource.List returns: the objects of
// namespace ("" for all) that selector selects, ordered by namespace and
// name so that evaluations are repeatable. Readers share it.
func ListOf(gvr schema.GroupVersionResource, objs []*unstructured.Unstructured, namespace string, selector labels.Selector) map[string]any {
	var matched []*unstructured.Unstructured
	for _, o := range objs {
		if (namespace == "" || o.GetNamespace() == namespace) && selector.Matches(labels.Set(o.GetLabels())) {
			matched = append(matched, o)
		}
	}
	sort.Slice(matched, func(i, j int) bool {
		if matched[i].GetNamespace() != matched[j].GetNamespace() {
			return matched[i].GetNamespace() < matched[j].GetNamespace()
		}
		return matched[i].GetName() < matched[j].GetName()
	})
	items := make([]any, 0, len(matched))
	for _, o := range matched {
		items = append(items, o.Object)
	}
	return map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       "List",
		"metadata":   map[string]any{},
		"items":      items,
	}
}

// ResourceFor guesses the resource of a kind, as kubectl does for kinds it
// has no discovery for.
func (r *ObjectReader) ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	if gvk.Kind == "" || gvk.Version == "" {
		return schema.GroupVersionResource{}, fmt.Errorf("apiVersion and kind are required")
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	return gvr, nil
}

// BuiltinScopes knows which built-in kinds are cluster-scoped; every other
// kind counts as namespaced. Offline evaluation has no API server to ask.
type BuiltinScopes struct{}

var _ Scopes = BuiltinScopes{}

// IsNamespaced reports whether gvk is namespaced.
func (BuiltinScopes) IsNamespaced(gvk schema.GroupVersionKind) (bool, error) {
	if gvk.Kind == "" {
		return false, fmt.Errorf("no kind")
	}
	return !clusterScoped[gvk.GroupKind()], nil
}

// KindScopes answers for the kinds it holds (true: namespaced) and leaves
// every other kind to BuiltinScopes: offline, a custom resource's scope
// comes from its CustomResourceDefinition, when one is given.
type KindScopes map[schema.GroupKind]bool

var _ Scopes = KindScopes{}

// IsNamespaced reports whether gvk is namespaced.
func (k KindScopes) IsNamespaced(gvk schema.GroupVersionKind) (bool, error) {
	if namespaced, ok := k[gvk.GroupKind()]; ok {
		return namespaced, nil
	}
	return BuiltinScopes{}.IsNamespaced(gvk)
}

// clusterScoped lists the cluster-scoped kinds of Kubernetes' built-in APIs.
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:        true,
	{Kind: "Node"}:             true,
	{Kind: "PersistentVolume"}: true,
	{Kind: "ComponentStatus"}:  true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "policies.kyverno.io", Kind: "GeneratingPolicy"}:                          true,
}
