package celenv_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
)

// generatedCM is what the policies of these tests generate once their
// variables have evaluated: the limits under test stop them before.
const generatedCM = `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}`

// evaluateOnce compiles policy, which must compile, and evaluates it once
// for the ConfigMap team/cm holding data. It returns what the evaluation
// allocated, garbage included, and its error.
func evaluateOnce(t *testing.T, policy apiv1.Policy, data map[string]any) (uint64, error) {
	t.Helper()
	p := celenv.Compile(policy)
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	trigger := object("v1", "ConfigMap", "team", "cm")
	if data != nil {
		trigger.Object["data"] = data
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := p.Evaluate(context.Background(), celenv.Input{Object: trigger.Object})
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, err
}

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
	for _, tc := range []struct{ name, unit, parse string }{
		// 16 bytes × 64 × 2^12 = 4 MiB
		{"yaml.parse", `- 0123456789abc\n`, "yaml.parse(variables.s12)"},
		{"json.unmarshal", `"0123456789abc",`, `json.unmarshal("[" + variables.s12 + "0]")`},
		{"x509.decode", `0123456789abcdef`, `x509.decode(variables.s12)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := append(doubling(tc.unit, 12), "doc", tc.parse)
			_, err := evaluateOnce(t, policyWith(false, `generator.Apply("x", variables.doc != null ? [`+generatedCM+`] : [])`, vars...), nil)
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
	vars := append(doubling(`- 0123456789abc\n`, 12), "doc", "yaml.parse(variables.s12)")
	alloc, err := evaluateOnce(t, policyWith(false, `generator.Apply("x", variables.doc != null ? [`+generatedCM+`] : [])`, vars...), nil)
	const bound = 64 << 20
	if alloc > bound {
		t.Fatalf("one evaluation allocated %d MiB, more than %d MiB (err: %v)", alloc>>20, bound>>20, err)
	}
	if err == nil {
		t.Fatal("want the evaluation refused")
	}
}

// TestYAMLAliasBombsAreRefused: a short document whose aliases expand it to
// millions of values is refused before it is expanded, whether the
// parser's own guard would let it through (one wide anchor named 99 times:
// 400,000 values from 8 KiB)
// or not (the classic "billion laughs", anchors nested nine deep). So is
// one the alias counter cannot read: the counter parses with yaml v3, the
// parser proper is sigs.k8s.io/yaml's (yaml v2), which reads the first
// node and stops where v3 reads on to an unterminated quote and fails.
// Before, what the counter could not read went to the parser uncounted.
func TestYAMLAliasBombsAreRefused(t *testing.T) {
	laughs := "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
	for i := 1; i < 9; i++ {
		laughs += fmt.Sprintf("l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 9), ", "))
	}
	wide := "a: &a [" + strings.TrimSuffix(strings.Repeat("x,", 4000), ",") + "]\n" +
		"b: [" + strings.TrimSuffix(strings.Repeat("*a,", 99), ",") + "]\n"
	flow := "[&a [" + strings.TrimSuffix(strings.Repeat("x,", 4000), ",") + "], " + strings.TrimSuffix(strings.Repeat("*a,", 99), ",") + "]\n, \""
	for name, doc := range map[string]string{"billion laughs": laughs, "wide anchor": wide, "wide anchor the counter cannot read": flow} {
		t.Run(name, func(t *testing.T) {
			alloc, err := evaluateOnce(t, policyWith(false, `generator.Apply("x", variables.doc != null ? [`+generatedCM+`] : [])`,
				"text", "object.data.text", "doc", "yaml.parse(variables.text)"), map[string]any{"text": doc})
			if err == nil || !strings.Contains(err.Error(), "spec.variables[1].expression: yaml.parse: its aliases ") {
				t.Fatalf("want yaml.parse refused, naming spec.variables[1].expression, got %v", err)
			}
			if alloc > 16<<20 {
				t.Fatalf("refusing it allocated %d MiB", alloc>>20)
			}
		})
	}
}

// TestOneEvaluationHasOneCostBudget: expressions each under the limit of one
// expression may not together spend more than PerEvaluationCostLimit, nor a
// template splice a variable into text more often than the budget pays for;
// an expression that absorbs the error (|| true) does not escape it.
func TestOneEvaluationHasOneCostBudget(t *testing.T) {
	vars := doubling(`- 0123456789abc\n`, 12) // 4 MiB, each step under the limit
	var uses []string
	for i := 1; i <= 12; i++ {
		vars = append(vars, fmt.Sprintf("copy%d", i), "variables.s12 + variables.s12")
		uses = append(uses, fmt.Sprintf("variables.copy%d", i))
	}
	all := "[" + strings.Join(uses, ", ") + "].all(c, c != '')"
	big := doubling(`- 0123456789abc\n`, 8) // 256 KiB
	spliced := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  k: \"" + strings.Repeat("((variables.s8))", 40) + "\"\n"
	for _, tc := range []struct {
		name     string
		generate string
		template string
		vars     []string
	}{
		{name: "many variables", generate: `generator.Apply("x", ` + all + ` ? [` + generatedCM + `] : [])`, vars: vars},
		{name: "error absorbed", generate: `generator.Apply("x", (` + all + ` || true) ? [` + generatedCM + `] : [])`, vars: vars},
		{name: "template splices", template: spliced, vars: big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := policyWith(false, tc.generate, tc.vars...).(*apiv1.GeneratingPolicy)
			if tc.template != "" {
				policy.Spec.Generation[0] = apiv1.Generation{Template: &apiv1.Template{Interpolate: apiv1.InterpolateCEL, Value: tc.template}}
			}
			_, err := evaluateOnce(t, policy, nil)
			want := fmt.Sprintf("cost more than their limit of %d together", celenv.PerEvaluationCostLimit)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "spec.generate[0].") {
				t.Fatalf("want an error naming spec.generate[0] and %q, got %.300v", want, err)
			}
		})
	}
}

// TestLazyListsAreBoundedWhenBuilt: CEL concatenates lists without copying
// them, so doubling a list costs nothing until something writes it out;
// writing out more than MaxValueBytes is refused.
func TestLazyListsAreBoundedWhenBuilt(t *testing.T) {
	vars := []string{"l0", "['xxxx']"}
	for i := 1; i <= 19; i++ {
		vars = append(vars, fmt.Sprintf("l%d", i), fmt.Sprintf("variables.l%d + variables.l%d", i-1, i-1))
	}
	vars = append(vars, "text", "json.marshal(variables.l19)")
	_, err := evaluateOnce(t, policyWith(false, `generator.Apply("x", variables.text != "" ? [`+generatedCM+`] : [])`, vars...), nil)
	want := fmt.Sprintf("larger than the limit of %d bytes", celenv.MaxValueBytes)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "spec.variables[20].expression: json.marshal") {
		t.Fatalf("want an error naming spec.variables[20].expression and %q, got %.300v", want, err)
	}
}

// TestBuildersAreBoundedBeforeTheyRun: replace, join and format can build a
// string far larger than their arguments; one over MaxValueBytes is refused
// before it is built.
func TestBuildersAreBoundedBeforeTheyRun(t *testing.T) {
	base := doubling(`- 0123456789abc\n`, 6) // s0: 1 KiB, s6: 64 KiB
	base = append(base, "l0", "[variables.s6]")
	for i := 1; i <= 10; i++ { // l10: 1024 times s6, 64 MiB joined
		base = append(base, fmt.Sprintf("l%d", i), fmt.Sprintf("variables.l%d + variables.l%d", i-1, i-1))
	}
	for name, expr := range map[string]string{
		"replace": "variables.s0.replace('', variables.s6)",
		"join":    "variables.l10.join()",
		"format":  "'%s'.format([variables.l6])",
	} {
		t.Run(name, func(t *testing.T) {
			vars := append(append([]string{}, base...), "out", expr)
			alloc, err := evaluateOnce(t, policyWith(false, `generator.Apply("x", variables.out != "" ? [`+generatedCM+`] : [])`, vars...), nil)
			want := fmt.Sprintf("spec.variables[18].expression: %s: the result would have", name)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("limit of %d", celenv.MaxValueBytes)) {
				t.Fatalf("want an error naming %q and the limit, got %.300v", want, err)
			}
			if alloc > 16<<20 {
				t.Fatalf("refusing it allocated %d MiB", alloc>>20)
			}
		})
	}
}

// TestFlattenIsBoundedBeforeItRuns: nested lists share their elements, so
// 25 short variables stand for 2^24 strings; flatten counts what it would
// make and refuses over celenv.MaxListElements before building any of it.
func TestFlattenIsBoundedBeforeItRuns(t *testing.T) {
	vars := []string{"l0", `["x"]`}
	for i := 1; i <= 24; i++ {
		vars = append(vars, fmt.Sprintf("l%d", i), fmt.Sprintf("[variables.l%d, variables.l%d]", i-1, i-1))
	}
	for _, c := range []struct {
		expr, err string
	}{
		{"variables.l24.flatten(30)", fmt.Sprintf("spec.variables[25].expression: flatten: the result would have more than %d elements", celenv.MaxListElements)},
		{"variables.l10.flatten(30)", ""}, // 1,024 elements
	} {
		vars := append(append([]string{}, vars...), "out", c.expr)
		alloc, err := evaluateOnce(t, policyWith(false, `generator.Apply("x", size(variables.out) > 0 ? [`+generatedCM+`] : [])`, vars...), nil)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.expr, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: want an error naming %q, got %.300v", c.expr, c.err, err)
		}
		if alloc > 64<<20 {
			t.Errorf("%s allocated %d MiB", c.expr, alloc>>20)
		}
	}
}
