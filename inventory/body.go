package inventory

import (
	"bytes"
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// protobufCodec encodes and decodes the built-in types client-go knows.
var protobufCodec = protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)

// protobufPrefix begins every protobuf body of the API server's.
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

// createBody encodes obj for its create, with the body's content type: as
// protobuf when obj is of a built-in type and converts to it exactly,
// otherwise as JSON.
//
// The API server decodes every create's body into its type; a protobuf
// body costs it far less CPU than a JSON one (docs/performance.md), and
// the API server's CPU is what bounds every writer's rate. The
// object the API server makes is the same either way: both bodies decode
// to the same typed object, and it stores that object as protobuf.
//
// Exactly means that the typed object says everything obj says, as the
// JSON would: no field unknown to the type, and converted back, every
// field and value of obj (a number out of its field's range, a quantity
// not in its canonical form or an empty map that protobuf cannot tell
// from an absent one go as JSON, for the API server to take or refuse as
// it would).
func createBody(obj *unstructured.Unstructured) ([]byte, string, error) {
	if body, ok := protobufBody(obj); ok {
		return body, runtime.ContentTypeProtobuf, nil
	}
	body, err := json.Marshal(obj.Object)
	return body, runtime.ContentTypeJSON, err
}

// protobufBody encodes obj as protobuf when it converts exactly to a
// built-in type (see createBody).
func protobufBody(obj *unstructured.Unstructured) ([]byte, bool) {
	typed, err := clientgoscheme.Scheme.New(obj.GroupVersionKind())
	if err != nil {
		return nil, false
	}
	// Unvalidated: a field unknown to the type is dropped, and the round
	// trip below then misses it (one that is null asks for absence, which
	// it gets either way). Validating cost a record of every key.
	conv := runtime.DefaultUnstructuredConverter
	if conv.FromUnstructured(obj.Object, typed) != nil {
		return nil, false
	}
	back, err := conv.ToUnstructured(typed)
	if err != nil || !coversValue(back, obj.Object) {
		return nil, false
	}
	var buf bytes.Buffer
	if protobufCodec.Encode(typed, &buf) != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

// madeAsSent reads a protobuf answer to the create of the protobuf body
// sent and returns the version made when the object made is the one sent
// but for what the API server sets on every create (its identity, version,
// generation, creation time and managed fields). sent converted exactly
// (protobufBody), so such an answer holds every field of the desired
// object; any other difference, a default or a webhook's change, is for
// createdAsDesired's comparison to weigh. Reading the answer this way costs
// an encode, where converting it to unstructured cost several times that.
func madeAsSent(answer, sent []byte, gvk schema.GroupVersionKind) (string, bool) {
	obj, got, err := protobufCodec.Decode(answer, nil, nil)
	if err != nil || got == nil || *got != gvk {
		return "", false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	version := m.GetResourceVersion()
	m.SetUID("")
	m.SetResourceVersion("")
	m.SetGeneration(0)
	m.SetCreationTimestamp(metav1.Time{})
	m.SetManagedFields(nil)
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	var made bytes.Buffer
	if protobufCodec.Encode(obj, &made) != nil || !bytes.Equal(made.Bytes(), sent) {
		return "", false
	}
	return version, version != ""
}

// fromProtobuf decodes a protobuf answer of kind gvk into unstructured, as
// the API server would encode it as JSON, less its managed fields; nil
// when it does not decode to that kind.
func fromProtobuf(answer []byte, gvk schema.GroupVersionKind) *unstructured.Unstructured {
	obj, got, err := protobufCodec.Decode(answer, nil, nil)
	if err != nil || got == nil || *got != gvk {
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	m.SetManagedFields(nil)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil
	}
	made := &unstructured.Unstructured{Object: content}
	made.SetGroupVersionKind(gvk)
	return made
}
