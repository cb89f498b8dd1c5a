package inventory

import (
	"bytes"
	"encoding/json"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/sprout-gitops/sprout/internal/wire"
)

// protobufCodec encodes and decodes the built-in types client-go knows.
var protobufCodec = protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)

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
	gvk := obj.GroupVersionKind()
	typed, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		return nil, false
	}
	if !plainInto(obj.Object, typed) {
		typed, _ = clientgoscheme.Scheme.New(gvk)
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
	}
	var body keptWrite
	if protobufCodec.EncodeWithAllocator(typed, &body, &runtime.SimpleAllocator{}) != nil {
		return nil, false
	}
	return body, true
}

// keptWrite keeps what is written to it, unlike an io.Writer: the protobuf
// encoder writes a body in one write, from the allocator it was given,
// which made it to measure; a buffer would copy it. The allocator is the
// body's alone, so nothing else writes to what is kept.
type keptWrite []byte

func (k *keptWrite) Write(p []byte) (int, error) {
	if *k == nil {
		*k = p
	} else {
		*k = append(*k, p...)
	}
	return len(p), nil
}

// madeAsSent reads a protobuf answer to the create of the protobuf body
// sent and returns the version made when the object made is the one sent
// but for what the API server sets on every create (its identity, version,
// generation, creation time and managed fields). sent converted exactly
// (protobufBody), so such an answer holds every field of the desired
// object; any other difference, a default or a webhook's change, is for
// createdAsDesired's comparison to weigh.
//
// It compares the two encodings field by field, without decoding either:
// both are the generated marshallers' output for the same type, which
// writes every field in the order of its number and a map's keys sorted,
// so the same object is the same bytes. Decoding the answer and encoding
// it again cost each create a copy of the object in memory
// (docs/performance.md has the figures).
func madeAsSent(answer, sent []byte, gvk schema.GroupVersionKind) (string, bool) {
	answerType, answerRaw, ok := wire.Envelope(answer)
	if !ok {
		return "", false
	}
	sentType, sentRaw, ok := wire.Envelope(sent)
	if !ok || !bytes.Equal(answerType, sentType) || !wire.KindIs(sentType, gvk) {
		return "", false
	}
	answerMeta, answerRest, ok := metadataFirst(answerRaw)
	if !ok {
		return "", false
	}
	sentMeta, sentRest, ok := metadataFirst(sentRaw)
	if !ok || !bytes.Equal(answerRest, sentRest) {
		return "", false
	}
	return sameMetadata(answerMeta, sentMeta)
}

// Field numbers madeAsSent reads: an object's metadata and, in ObjectMeta,
// what the API server sets on every create.
const (
	objectMetadata        protowire.Number = 1
	metaUID               protowire.Number = 5
	metaResourceVersion   protowire.Number = 6
	metaGeneration        protowire.Number = 7
	metaCreationTimestamp protowire.Number = 8
	metaManagedFields     protowire.Number = 17
)

// metadataFirst splits an encoded object into its metadata and the fields
// after it; the generated marshallers write metadata, field 1, first.
func metadataFirst(raw []byte) (metadata, rest []byte, ok bool) {
	f, rest, ok := wire.Next(raw)
	if !ok || f.Num != objectMetadata || f.Type != protowire.BytesType {
		return nil, nil, false
	}
	return f.Value, rest, true
}

// setOnCreate reports whether the API server sets field num of ObjectMeta
// on every create.
func setOnCreate(num protowire.Number) bool {
	switch num {
	case metaUID, metaResourceVersion, metaGeneration, metaCreationTimestamp, metaManagedFields:
		return true
	}
	return false
}

// sameMetadata compares the encoded metadata of a create's answer with
// the one sent, but for the fields the API server sets on every create,
// which the one sent must leave empty; it returns the answer's
// resourceVersion when they are the same.
func sameMetadata(answer, sent []byte) (version string, ok bool) {
	versionOf := func(f wire.Field) bool {
		if f.Num == metaResourceVersion {
			version = string(f.Value)
		}
		return true
	}
	for {
		a, answerRest, inAnswer, ok := nextKept(answer, versionOf)
		if !ok {
			return "", false
		}
		s, sentRest, inSent, ok := nextKept(sent, emptyValue)
		if !ok {
			return "", false
		}
		if !inAnswer && !inSent {
			return version, version != ""
		}
		if inAnswer != inSent || !bytes.Equal(a.Whole, s.Whole) {
			return "", false
		}
		answer, sent = answerRest, sentRest
	}
}

// nextKept reads the fields of encoded metadata b up to the first one the
// API server does not set on every create, and returns it and what follows
// (found is false when b ends first); each field it passes over goes to
// passed, and ok is false when passed refuses one or b does not decode.
func nextKept(b []byte, passed func(wire.Field) bool) (f wire.Field, rest []byte, found, ok bool) {
	for len(b) > 0 {
		if f, b, ok = wire.Next(b); !ok {
			return wire.Field{}, nil, false, false
		}
		if !setOnCreate(f.Num) {
			return f, b, true, true
		}
		if !passed(f) {
			return wire.Field{}, nil, false, false
		}
	}
	return wire.Field{}, nil, false, true
}

// emptyValue reports whether f holds its type's zero: an empty string or
// message, or a 0.
func emptyValue(f wire.Field) bool {
	switch f.Type {
	case protowire.BytesType:
		return len(f.Value) == 0
	case protowire.VarintType:
		v, _ := protowire.ConsumeVarint(f.Value)
		return v == 0
	}
	return false
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
