package celenv_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/sprout-gitops/sprout/celenv"
)

// doubling returns variables that build unit*64 and then double it n
// times, each variable under the cost limit of one expression: how a policy
// builds a string of megabytes from a short source. The last one is
// variables.s<n>.
func doubling(unit string, n int) []string {
	vars := []string{"s0", "'" + strings.Repeat(unit, 64) + "'"}
	for i := 1; i <= n; i++ {
		vars = append(vars, fmt.Sprintf("s%d", i), fmt.Sprintf("variables.s%d + variables.s%d", i-1, i-1))
	}
	return vars
}

func TestParseOfAHugeStringIsRefused(t *testing.T) {
	const cm = `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}`
	for _, tc := range []struct{ name, unit, parse string }{
		// 16 bytes × 64 × 2^12 = 4 MiB
		{"yaml.parse", `- 0123456789abc\n`, "yaml.parse(variables.s12)"},
		{"json.unmarshal", `"0123456789abc",`, `json.unmarshal("[" + variables.s12 + "0]")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := append(doubling(tc.unit, 12), "doc", tc.parse)
			p := celenv.Compile(policyWith(false, `generator.Apply("x", variables.doc != null ? [`+cm+`] : [])`, vars...))
			if err := p.Err(); err != nil {
				t.Fatal(err)
			}
			_, err := p.Evaluate(context.Background(), celenv.Input{Object: object("v1", "ConfigMap", "team", "cm").Object})
			want := fmt.Sprintf("spec.variables[13].expression: %s: the text has 4194", tc.name)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprint(celenv.MaxParseBytes)) {
				t.Fatalf("want an error naming %q and the limit %d, got %v", want, celenv.MaxParseBytes, err)
			}
		})
	}
}

// TestOneEvaluationHasBoundedMemory evaluates the attacker's policy once and
// bounds what it allocates, garbage included: what one evaluation may make
// Sprout's heap grow by.
func TestOneEvaluationHasBoundedMemory(t *testing.T) {
	const cm = `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}`
	vars := append(doubling(`- 0123456789abc\n`, 12), "doc", "yaml.parse(variables.s12)")
	p := celenv.Compile(policyWith(false, `generator.Apply("x", variables.doc != null ? [`+cm+`] : [])`, vars...))
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	in := celenv.Input{Object: object("v1", "ConfigMap", "team", "cm").Object}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := p.Evaluate(context.Background(), in)
	runtime.ReadMemStats(&after)
	const bound = 64 << 20
	if got := after.TotalAlloc - before.TotalAlloc; got > bound {
		t.Fatalf("one evaluation allocated %d MiB, more than %d MiB (err: %v)", got>>20, bound>>20, err)
	}
	if err == nil {
		t.Fatal("want the evaluation refused")
	}
}
