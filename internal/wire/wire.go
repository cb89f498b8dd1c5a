// Package wire reads the API server's encodings without decoding the
// objects in them: a protobuf envelope (runtime.Unknown behind its magic
// prefix), which every protobuf body and watch event object comes in, and
// the fields of any message inside it, field by field, as slices of the
// bytes it was given; and the items of a list in JSON, each a copy, for
// their own decoder (SplitJSONList).
package wire

import (
	"bytes"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Prefix begins every protobuf object of the API server's.
var Prefix = []byte{0x6b, 0x38, 0x73, 0x00}

// Field numbers of runtime.Unknown (the envelope) and of TypeMeta.
const (
	unknownTypeMeta        protowire.Number = 1
	unknownRaw             protowire.Number = 2
	unknownContentEncoding protowire.Number = 3
	unknownContentType     protowire.Number = 4
	typeMetaAPIVersion     protowire.Number = 1
	typeMetaKind           protowire.Number = 2
)

// Field is one field of a protobuf message: its number, its type, its
// value (a length-delimited one without its length) and its whole encoding.
type Field struct {
	Num          protowire.Number
	Type         protowire.Type
	Value, Whole []byte
}

// Next reads the field b begins with and returns it and what follows; ok
// is false when b does not begin with a whole field.
func Next(b []byte) (f Field, rest []byte, ok bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return Field{}, nil, false
	}
	m := protowire.ConsumeFieldValue(num, typ, b[n:])
	if m < 0 {
		return Field{}, nil, false
	}
	f = Field{Num: num, Type: typ, Value: b[n : n+m], Whole: b[:n+m]}
	if typ == protowire.BytesType {
		f.Value, _ = protowire.ConsumeBytes(b[n:])
	}
	return f, b[n+m:], true
}

// TwoFields returns the values of fields first and second of an encoded
// message, nil for one it does not hold (the last, for one it holds more
// than once, as a decoder keeps); ok is false when it does not decode.
func TwoFields(msg []byte, first, second protowire.Number) (a, b []byte, ok bool) {
	for len(msg) > 0 {
		var f Field
		if f, msg, ok = Next(msg); !ok {
			return nil, nil, false
		}
		switch f.Num {
		case first:
			a = f.Value
		case second:
			b = f.Value
		}
	}
	return a, b, true
}

// Envelope returns the TypeMeta and the raw object of a protobuf object of
// the API server's: its runtime.Unknown after the magic prefix. ok is
// false unless body is one, holding a raw object in protobuf itself (no
// other content type, no content encoding).
func Envelope(body []byte) (typeMeta, raw []byte, ok bool) {
	b, found := bytes.CutPrefix(body, Prefix)
	if !found {
		return nil, nil, false
	}
	for len(b) > 0 {
		var f Field
		if f, b, ok = Next(b); !ok {
			return nil, nil, false
		}
		switch f.Num {
		case unknownTypeMeta:
			typeMeta = f.Value
		case unknownRaw:
			raw = f.Value
		case unknownContentEncoding, unknownContentType:
			if len(f.Value) > 0 {
				return nil, nil, false
			}
		}
	}
	return typeMeta, raw, raw != nil
}

// Kind returns the group, version and kind an encoded TypeMeta names.
func Kind(typeMeta []byte) (schema.GroupVersionKind, bool) {
	apiVersion, kind, ok := TwoFields(typeMeta, typeMetaAPIVersion, typeMetaKind)
	if !ok || len(kind) == 0 {
		return schema.GroupVersionKind{}, false
	}
	gv, err := schema.ParseGroupVersion(string(apiVersion))
	if err != nil {
		return schema.GroupVersionKind{}, false
	}
	return gv.WithKind(string(kind)), true
}

// KindIs reports whether an encoded TypeMeta names gvk, without making
// strings of it.
func KindIs(typeMeta []byte, gvk schema.GroupVersionKind) bool {
	apiVersion, kind, ok := TwoFields(typeMeta, typeMetaAPIVersion, typeMetaKind)
	if !ok || string(kind) != gvk.Kind {
		return false
	}
	if gvk.Group == "" {
		return string(apiVersion) == gvk.Version
	}
	group, version, found := bytes.Cut(apiVersion, []byte("/"))
	return found && string(group) == gvk.Group && string(version) == gvk.Version
}
