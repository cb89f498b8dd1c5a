package celjson_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/go-cmp/cmp"

	"github.com/sprout-gitops/sprout/celenv/celjson"
)

func TestConvert(t *testing.T) {
	adapter := types.DefaultTypeAdapter
	tests := []struct {
		name    string
		in      ref.Val
		want    any
		wantErr string
	}{
		{name: "a map of lists", in: adapter.NativeToValue(map[string]any{"a": []any{int64(1), "x", true, nil}}),
			want: map[string]any{"a": []any{int64(1), "x", true, nil}}},
		{name: "a uint within int64", in: types.Uint(7), want: int64(7)},
		{name: "bytes are base64", in: types.Bytes("hi"), want: "aGk="},
		{name: "a timestamp is RFC 3339 in UTC", in: types.Timestamp{Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))},
			want: "2025-01-02T02:04:05Z"},
		{name: "a duration", in: types.Duration{Duration: 90 * time.Second}, want: "1m30s"},
		{name: "a uint past int64", in: types.Uint(math.MaxUint64), wantErr: "out of range"},
		{name: "NaN", in: types.Double(math.NaN()), wantErr: "JSON has no infinity or NaN"},
		{name: "a key that is not a string", in: adapter.NativeToValue(map[int64]any{1: "x"}), wantErr: "map key 1 is a int"},
		{name: "an error in a list names its index", in: adapter.NativeToValue([]any{1.0, math.Inf(1)}), wantErr: "[1]: +Inf"},
		{name: "over MaxValueBytes", in: types.String(strings.Repeat("x", celjson.MaxValueBytes)), wantErr: "larger than the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := celjson.Convert(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("want an error containing %q, got %v (value %#v)", tt.wantErr, err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// ConvertSized charges every value it copies, and stops with charge's error.
func TestConvertSizedChargesAndStops(t *testing.T) {
	list := types.DefaultTypeAdapter.NativeToValue([]any{"abc", "de"})
	var charged uint64
	_, size, err := celjson.ConvertSized(list, func(n uint64) error { charged += n; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if charged == 0 || charged != size {
		t.Errorf("charged %d, size %d: want the size charged", charged, size)
	}

	stop := errors.New("stopped")
	calls := 0
	_, _, err = celjson.ConvertSized(list, func(uint64) error {
		if calls++; calls == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 2 {
		t.Errorf("want charge's error at its second call, got %v after %d", err, calls)
	}
}
