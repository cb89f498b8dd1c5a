package cluster

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// metaView is an Object as metav1.Object, for the informers' key functions:
// its namespace, name, UID and resourceVersion, and nothing else. An Object
// is never modified, so the setters do nothing.
type metaView Object

func (m *metaView) GetNamespace() string                        { return m.namespace }
func (m *metaView) GetName() string                             { return m.name }
func (m *metaView) GetUID() types.UID                           { return m.uid }
func (m *metaView) GetResourceVersion() string                  { return m.resourceVersion }
func (*metaView) GetGenerateName() string                       { return "" }
func (*metaView) GetGeneration() int64                          { return 0 }
func (*metaView) GetSelfLink() string                           { return "" }
func (*metaView) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (*metaView) GetDeletionTimestamp() *metav1.Time            { return nil }
func (*metaView) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (*metaView) GetLabels() map[string]string                  { return nil }
func (*metaView) GetAnnotations() map[string]string             { return nil }
func (*metaView) GetFinalizers() []string                       { return nil }
func (*metaView) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (*metaView) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (*metaView) SetNamespace(string)                           {}
func (*metaView) SetName(string)                                {}
func (*metaView) SetGenerateName(string)                        {}
func (*metaView) SetUID(types.UID)                              {}
func (*metaView) SetResourceVersion(string)                     {}
func (*metaView) SetGeneration(int64)                           {}
func (*metaView) SetSelfLink(string)                            {}
func (*metaView) SetCreationTimestamp(metav1.Time)              {}
func (*metaView) SetDeletionTimestamp(*metav1.Time)             {}
func (*metaView) SetDeletionGracePeriodSeconds(*int64)          {}
func (*metaView) SetLabels(map[string]string)                   {}
func (*metaView) SetAnnotations(map[string]string)              {}
func (*metaView) SetFinalizers([]string)                        {}
func (*metaView) SetOwnerReferences([]metav1.OwnerReference)    {}
func (*metaView) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
