package inventory

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("a", 100)
	tests := []struct {
		name, in string
		keep     bool
	}{
		{name: "short name is kept", in: "team-red", keep: true},
		{name: "empty is kept", in: "", keep: true},
		{name: "63 characters are kept", in: strings.Repeat("b", 63), keep: true},
		{name: "64 characters are encoded", in: strings.Repeat("b", 64)},
		{name: "long name is encoded", in: long},
		{name: "prefix ending in a dot is trimmed", in: strings.Repeat("c", 45) + "." + long},
		{name: "no alphanumerics", in: strings.Repeat(".", 70)},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LabelValue(tt.in)
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Fatalf("LabelValue(%q) = %q is not a label value: %v", tt.in, got, errs)
			}
			if tt.keep != (got == tt.in) {
				t.Fatalf("LabelValue(%q) = %q, keep=%v", tt.in, got, tt.keep)
			}
			if got != LabelValue(tt.in) {
				t.Fatal("encoding is not stable")
			}
			if other, ok := seen[got]; ok && other != tt.in {
				t.Fatalf("%q and %q encode to the same value", tt.in, other)
			}
			seen[got] = tt.in
		})
	}
}
