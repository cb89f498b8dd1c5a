// Package celjson owns the copy of CEL values into the JSON-safe Go values
// unstructured objects hold, and its bound, MaxValueBytes: what an
// evaluation writes into an object, and what Kyverno's functions
// (json.marshal, an http body) serialise, goes through it.
package celjson

import (
	"encoding/base64"
	"fmt"
	"math"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// MaxValueBytes bounds one value Sprout turns into JSON (json.marshal,
// generator.Apply, setField, a template placeholder), roughly as its JSON
// text. It is the API server's limit on a request: no object larger can be
// written anyway.
const MaxValueBytes = 3 << 20

// Convert turns a CEL value into the JSON-safe Go value unstructured objects
// hold: map[string]any, []any, string, int64, float64, bool or nil. A value
// JSON cannot hold (an infinite or NaN double, a uint past int64) is an
// error here, not a failed apply later.
//
// It is bounded by MaxValueBytes alone: the functions that call it during
// an expression copy at most that much. Results of an evaluation are
// converted with ConvertSized, which also charges the evaluation's budget.
func Convert(v ref.Val) (any, error) {
	out, _, err := ConvertSized(v, nil)
	return out, err
}

// ConvertSized is Convert that also returns about how many bytes the value
// has as JSON. It refuses a value over MaxValueBytes as soon as it has
// copied that much: a list CEL concatenated lazily may stand for far more
// than memory holds. With charge (the evaluation's budget), each value
// copied is also charged its bytes, and an error from charge stops the copy
// with that error, so the copy stops with the evaluation.
func ConvertSized(v ref.Val, charge func(n uint64) error) (any, uint64, error) {
	c := converter{left: MaxValueBytes, charge: charge}
	out, err := c.convert(v)
	return out, uint64(MaxValueBytes - c.left), err
}

// converter counts what ConvertSized has copied.
type converter struct {
	left   int64
	charge func(n uint64) error // nil: bounded by left alone
}

// take spends n bytes, failing past MaxValueBytes.
func (c *converter) take(n int) error {
	c.left -= int64(n)
	if c.left < 0 {
		return fmt.Errorf("the value is larger than the limit of %d bytes", MaxValueBytes)
	}
	return nil
}

// spend takes and charges what v costs itself, before its elements.
func (c *converter) spend(v ref.Val) error {
	size := 8
	switch v := v.(type) {
	case types.String:
		size += len(v)
	case types.Bytes:
		size += len(v) * 4 / 3
	}
	if err := c.take(size); err != nil {
		return err
	}
	if c.charge != nil {
		return c.charge(uint64(size))
	}
	return nil
}

// convert copies v, spending its bytes as it goes.
func (c *converter) convert(v ref.Val) (any, error) {
	if err := c.spend(v); err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(v), nil
	case types.Int:
		return int64(v), nil
	case types.Uint:
		if v > math.MaxInt64 {
			return nil, fmt.Errorf("%du is out of range: an object holds integers up to %d", uint64(v), math.MaxInt64)
		}
		return int64(v), nil
	case types.Double:
		if f := float64(v); math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("%v: JSON has no infinity or NaN", f)
		}
		return float64(v), nil
	case types.String:
		return string(v), nil
	case types.Bytes:
		return base64.StdEncoding.EncodeToString(v), nil
	case types.Timestamp:
		return v.Time.UTC().Format(time.RFC3339), nil
	case types.Duration:
		return v.Duration.String(), nil
	case traits.Mapper:
		return c.convertMap(v)
	case traits.Lister:
		return c.convertList(v)
	case *types.Err:
		return nil, v
	default:
		return nil, fmt.Errorf("a %s cannot be written into an object", v.Type().TypeName())
	}
}

// convertMap copies a map, whose keys must be strings.
func (c *converter) convertMap(v traits.Mapper) (any, error) {
	out := map[string]any{}
	it := v.Iterator()
	for it.HasNext() == types.True {
		k := it.Next()
		key, ok := k.(types.String)
		if !ok {
			return nil, fmt.Errorf("map key %v is a %s, not a string", k, k.Type().TypeName())
		}
		if err := c.take(len(key)); err != nil {
			return nil, err
		}
		val, err := c.convert(v.Get(k))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		out[string(key)] = val
	}
	return out, nil
}

// convertList copies a list.
func (c *converter) convertList(v traits.Lister) (any, error) {
	n, _ := v.Size().(types.Int)
	// Each element takes at least a byte: a list longer than the limit
	// fails before its slice is made.
	if int64(n) > c.left {
		return nil, c.take(int(n))
	}
	out := make([]any, 0, int(n))
	for i := types.Int(0); i < n; i++ {
		val, err := c.convert(v.Get(i))
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out = append(out, val)
	}
	return out, nil
}
