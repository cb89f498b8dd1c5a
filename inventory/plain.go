package inventory

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// plainInto sets into, a new object of a built-in type, from obj, the
// object's unstructured content, when every value obj holds converts to
// its field without loss and back: then the protobuf body encoded from
// into says exactly what obj says (createBody). It reports false when one
// may not, leaving into partly set, and the caller converts the general
// way, which decides.
//
// It takes only values of plain kinds, strings, booleans and integers in
// their field's range, in structs, pointers, and maps and lists that hold
// something. Anything else is left to the general way: a key the type
// does not have, a null inside a list or map, an empty map or list
// (protobuf cannot tell it from an absent one), an empty string, false or
// 0 in a field that JSON omits when empty (the object made would lack
// it), bytes (base64), numbers with a fraction, and every type that
// encodes itself (a quantity, a time, an int-or-string), whose encoding
// need not be the one obj gives.
//
// The general way, apimachinery's unstructured converter both ways and a
// comparison, walks the object three times by reflection, on every create
// (docs/decisions.md has what it cost); this walks obj once, with each
// struct's fields looked up in a table built once.
func plainInto(obj map[string]any, into any) bool {
	v := reflect.ValueOf(into)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return false
	}
	return setStruct(v.Elem(), obj)
}

// setStruct sets the fields of struct v that m names.
func setStruct(v reflect.Value, m map[string]any) bool {
	fields := jsonFieldsOf(v.Type())
	if fields == nil {
		return false
	}
	for k, d := range m {
		f, ok := fields[k]
		if !ok {
			return false
		}
		if d == nil {
			continue // a null asks for absence: the zero the field holds
		}
		fv := v.FieldByIndex(f.index)
		if f.omitEmpty && fv.Kind() != reflect.Pointer && omittedEmpty(d) {
			return false
		}
		if !setPlain(fv, d) {
			return false
		}
	}
	return true
}

// setPlain sets v, settable, to d.
func setPlain(v reflect.Value, d any) bool {
	t := v.Type()
	if !plainType(t) {
		return false
	}
	switch t.Kind() {
	case reflect.String:
		s, ok := d.(string)
		if ok {
			v.SetString(s)
		}
		return ok
	case reflect.Bool:
		b, ok := d.(bool)
		if ok {
			v.SetBool(b)
		}
		return ok
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := d.(int64)
		if !ok || v.OverflowInt(n) {
			return false
		}
		v.SetInt(n)
		return true
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if !setPlain(p.Elem(), d) {
			return false
		}
		v.Set(p)
		return true
	case reflect.Struct:
		m, ok := d.(map[string]any)
		return ok && len(m) > 0 && setStruct(v, m)
	case reflect.Slice:
		return setSlice(v, d)
	case reflect.Map:
		return setMap(v, d)
	}
	return false
}

func setSlice(v reflect.Value, d any) bool {
	l, ok := d.([]any)
	if !ok || len(l) == 0 || v.Type().Elem().Kind() == reflect.Uint8 {
		return false
	}
	s := reflect.MakeSlice(v.Type(), len(l), len(l))
	for i, x := range l {
		if x == nil || !setPlain(s.Index(i), x) {
			return false
		}
	}
	v.Set(s)
	return true
}

var stringMapType = reflect.TypeFor[map[string]string]()

func setMap(v reflect.Value, d any) bool {
	m, ok := d.(map[string]any)
	t := v.Type()
	if !ok || len(m) == 0 || t.Key().Kind() != reflect.String {
		return false
	}
	if t == stringMapType { // labels, annotations, a ConfigMap's data: no reflection per entry
		out := make(map[string]string, len(m))
		for k, x := range m {
			s, ok := x.(string)
			if !ok {
				return false
			}
			out[k] = s
		}
		*v.Addr().Interface().(*map[string]string) = out
		return true
	}
	out := reflect.MakeMapWithSize(t, len(m))
	for k, x := range m {
		e := reflect.New(t.Elem()).Elem()
		if x == nil || !setPlain(e, x) {
			return false
		}
		out.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), e)
	}
	v.Set(out)
	return true
}

// omittedEmpty reports whether d is what JSON leaves out of a field marked
// omitempty.
func omittedEmpty(d any) bool {
	switch d := d.(type) {
	case string:
		return d == ""
	case bool:
		return !d
	case int64:
		return d == 0
	}
	return false
}

// field is where a JSON member is in a struct.
type field struct {
	index     []int
	omitEmpty bool
}

// structFields and plainTypes are built once per type.
var structFields, plainTypes sync.Map

// jsonFieldsOf returns the fields of struct t by their JSON names, those of
// its inlined structs among them; nil when one is inlined through a
// pointer, which setting would have to allocate.
func jsonFieldsOf(t reflect.Type) map[string]field {
	if f, ok := structFields.Load(t); ok {
		return f.(map[string]field)
	}
	fields := map[string]field{}
	if !addFields(fields, t, nil) {
		fields = nil
	}
	structFields.Store(t, fields)
	return fields
}

func addFields(fields map[string]field, t reflect.Type, at []int) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		index := append(append([]int(nil), at...), i)
		if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
			if f.Type.Kind() != reflect.Struct || !addFields(fields, f.Type, index) {
				return false
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, twice := fields[name]; twice {
			return false
		}
		fields[name] = field{index: index, omitEmpty: hasOption(opts, "omitempty")}
	}
	return true
}

func hasOption(opts, opt string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

var (
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// plainType reports whether t encodes as its kind says: not a type that
// encodes or decodes itself.
func plainType(t reflect.Type) bool {
	if p, ok := plainTypes.Load(t); ok {
		return p.(bool)
	}
	plain := true
	for _, i := range []reflect.Type{jsonMarshaler, jsonUnmarshaler, textMarshaler, textUnmarshaler} {
		if t.Implements(i) || reflect.PointerTo(t).Implements(i) {
			plain = false
		}
	}
	plainTypes.Store(t, plain)
	return plain
}
