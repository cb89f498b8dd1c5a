package celenv

import (
	"encoding/base64"
	"fmt"
	"math"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// toJSON turns a CEL value into the JSON-safe Go value unstructured objects
// hold: map[string]any, []any, string, int64, float64, bool or nil. A value
// JSON cannot hold (an infinite or NaN double, a uint past int64) is an
// error here, not a failed apply later.
func toJSON(v ref.Val) (any, error) {
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
		out := map[string]any{}
		it := v.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			key, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is a %s, not a string", k, k.Type().TypeName())
			}
			val, err := toJSON(v.Get(k))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			out[string(key)] = val
		}
		return out, nil
	case traits.Lister:
		n, _ := v.Size().(types.Int)
		out := make([]any, 0, int(n))
		for i := types.Int(0); i < n; i++ {
			val, err := toJSON(v.Get(i))
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out = append(out, val)
		}
		return out, nil
	case *types.Err:
		return nil, v
	default:
		return nil, fmt.Errorf("a %s cannot be written into an object", v.Type().TypeName())
	}
}
