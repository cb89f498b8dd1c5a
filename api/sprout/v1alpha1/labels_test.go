package v1alpha1

import (
	"os"
	"os/exec"
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
		// ClusterRole names may hold characters a label value cannot.
		{name: "colon is encoded", in: "system:aggregate-to-admin"},
		{name: "leading space is encoded", in: " 0"},
		{name: "unicode is encoded", in: "ünïcödé"},
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

// TestLabelValueShellRecipe runs the selector recipe of docs/labels.md, so
// the documentation cannot drift from the encoding.
func TestLabelValueShellRecipe(t *testing.T) {
	for _, tool := range []string{"bash", "sha256sum", "cut", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	recipe := `hash=$(printf %s "$name" | sha256sum | cut -c1-16)
prefix=$(printf %s "$name" | LC_ALL=C cut -c1-46 |
  LC_ALL=C sed 's/[^-A-Za-z0-9_.]/-/g; s/^[^A-Za-z0-9]*//; s/[^A-Za-z0-9]*$//')
printf %s "$prefix-$hash"`
	doc, err := os.ReadFile("../../../docs/labels.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), recipe[:strings.LastIndex(recipe, "\n")]) {
		t.Fatal("docs/labels.md no longer holds the recipe this test runs")
	}
	for _, name := range []string{
		strings.Repeat("my-very-long-trigger-name-", 4),
		strings.Repeat("c", 45) + "." + strings.Repeat("a", 100),
		"system:aggregate-to-admin",
		"ünïcödé-" + strings.Repeat("x", 60),
	} {
		cmd := exec.Command("bash", "-c", recipe)
		cmd.Env = append(os.Environ(), "name="+name)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("recipe for %q: %v", name, err)
		}
		if got := LabelValue(name); string(out) != got {
			t.Errorf("recipe for %q gives %q, LabelValue %q", name, out, got)
		}
	}
}

// BenchmarkLabelValue measures encoding a trigger name as a label value:
// a name that is one already, and one that must be encoded.
func BenchmarkLabelValue(b *testing.B) {
	for name, s := range map[string]string{
		"valid":   "team-red",
		"encoded": "system:aggregate-to-admin:" + strings.Repeat("x", 70),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if LabelValue(s) == "" {
					b.Fatal("empty label value")
				}
			}
		})
	}
}
