package inventory

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"
)

// TestAppendJSONWritesWhatMarshalWrites: the stamps already in clusters
// were made by json.Marshal; appendJSON must write the same bytes.
func TestAppendJSONWritesWhatMarshalWrites(t *testing.T) {
	objects, _ := desiredSet(2)
	for _, v := range []any{
		"<a&b>", "\u2028 and \u2029", "\x00\x1f\x7f\b\f\n\r\t\"\\", "bad \xff utf-8 \xe2\x82", "日本",
		1e21, 1e20, 1e-6, 1e-7, 0.1, math.Copysign(0, -1), 123456789.125, 5e-324, math.MaxFloat64,
		int64(math.MinInt64), int64(0), true, nil,
		map[string]any(nil), []any(nil), map[string]any{}, []any{},
		map[string]any{"b": []any{int64(1), "x", nil, map[string]any{"z": 1.5, "a": false}}, "a": "<"},
		objects[0].Object, objects[1].Object,
	} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendJSON(nil, v)
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("appendJSON(%#v) = %s, %v; Marshal wrote %s", v, got, ok, want)
		}
	}
	for _, v := range []any{math.NaN(), math.Inf(1), 3, float32(1), map[string]any{"k": []string{"x"}}} {
		if _, ok := appendJSON(nil, v); ok {
			t.Errorf("appendJSON(%#v) wrote it; want it left to Marshal", v)
		}
	}
}

// FuzzAppendJSON builds nested values from the input and holds appendJSON
// to json.Marshal.
func FuzzAppendJSON(f *testing.F) {
	f.Add([]byte("\x05\x03ab\x00\x02<&\x01\x40\x09\x1e\x00\x00\x00\x00\x00\x06\x02\xff\xfe"))
	f.Add([]byte("\x06\x04\x02k\xe2\x80\xa8\x03\x08\x01\x02\x03\x04\x05\x06\x07\x08\x04\x07"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v := fuzzValue(&data, 0)
		want, err := json.Marshal(v)
		got, ok := appendJSON(nil, v)
		if err != nil {
			if ok {
				t.Fatalf("appendJSON wrote %s; Marshal failed: %v", got, err)
			}
			return
		}
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("appendJSON(%#v) = %s, %v; Marshal wrote %s", v, got, ok, want)
		}
	})
}

// fuzzValue reads one value from the front of data.
func fuzzValue(data *[]byte, depth int) any {
	next := func(n int) []byte {
		n = min(n, len(*data))
		b := (*data)[:n]
		*data = (*data)[n:]
		return b
	}
	kind := next(1)
	if len(kind) == 0 {
		return nil
	}
	switch kind[0] % 8 {
	case 0:
		return nil
	case 1:
		return kind[0]&0x80 != 0
	case 2:
		return string(next(int(kind[0] >> 3)))
	case 3:
		var b [8]byte
		copy(b[:], next(8))
		return int64(binary.LittleEndian.Uint64(b[:]))
	case 4:
		var b [8]byte
		copy(b[:], next(8))
		return math.Float64frombits(binary.LittleEndian.Uint64(b[:]))
	case 5, 6:
		if depth > 4 {
			return nil
		}
		n := int(kind[0]>>3) % 6
		if kind[0]%8 == 5 {
			s := make([]any, 0, n)
			for range n {
				s = append(s, fuzzValue(data, depth+1))
			}
			return s
		}
		m := make(map[string]any, n)
		for range n {
			size := 0
			if b := next(1); len(b) > 0 {
				size = int(b[0] % 8)
			}
			m[string(next(size))] = fuzzValue(data, depth+1)
		}
		return m
	default:
		if kind[0]&0x80 != 0 {
			return map[string]any(nil)
		}
		return []any(nil)
	}
}
