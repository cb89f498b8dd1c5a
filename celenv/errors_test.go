package celenv_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
)

// TestBadInputNamesTheFieldPath: every kind of bad policy fails with a
// message that names the policy and the field path, at compile time where
// the mistake can be seen then, else at evaluation.
func TestBadInputNamesTheFieldPath(t *testing.T) {
	const cm = `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}`
	digits := "[0,1,2,3,4,5,6,7,8,9]"
	runaway := digits + ".map(a, " + digits + ".map(b, " + digits + ".map(c, " + digits + ".map(d, " + digits + ".map(e, " + digits + ".map(f, a+b+c+d+e+f))))))"
	tests := []struct {
		name      string
		variables []string
		generate  string
		template  *apiv1.Template
		path      string
		want      string
		atRuntime bool
	}{
		{name: "syntax error", variables: []string{"a", "object.metadata.name +"},
			generate: `generator.Apply("x", [])`, path: "spec.variables[0].expression", want: "Syntax error"},
		{name: "type error", variables: []string{"a", "'text' + 1"},
			generate: `generator.Apply("x", [])`, path: "spec.variables[0].expression", want: "no matching overload"},
		{name: "unknown variable", generate: `generator.Apply(variables.nsName, [])`,
			path: "spec.generate[0].expression", want: "undefined variable variables.nsName"},
		{name: "variable used before it is defined", variables: []string{"a", "variables.b", "b", "1"},
			generate: `generator.Apply("x", [])`, path: "spec.variables[0].expression", want: "undefined variable variables.b"},
		{name: "unsupported library", variables: []string{"a", `image.GetMetadata("nginx")`},
			generate: `generator.Apply("x", [])`, path: "spec.variables[0].expression", want: "not supported"},
		{name: "generate expression not bool", generate: `"done"`,
			path: "spec.generate[0].expression", want: "must evaluate to bool or a list of bools, not string"},
		{name: "runaway cost", variables: []string{"big", runaway},
			generate: `generator.Apply("x", variables.big.size() > 0 ? [` + cm + `] : [])`,
			path:     "spec.variables[0].expression", want: "cost limit exceeded", atRuntime: true},
		{name: "runtime error", generate: `generator.Apply(object.missing.field, [])`,
			path: "spec.generate[0].expression", want: "no such key", atRuntime: true},
		{name: "placeholder in a mapping key",
			template: &apiv1.Template{Interpolate: apiv1.InterpolateCEL, Value: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  (( object.metadata.name )): x\n"},
			path:     "spec.generate[0].template.value", want: "key"},
		{name: "invalid YAML in a template",
			template: &apiv1.Template{Value: "apiVersion: v1\nkind: [ConfigMap\n"},
			path:     "spec.generate[0].template.value", want: "document 0"},
	}
	trigger := object("v1", "Namespace", "", "team")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policyWith(false, tt.generate, tt.variables...).(*apiv1.GeneratingPolicy)
			if tt.template != nil {
				p.Spec.Generation[0] = apiv1.Generation{Template: tt.template}
			}
			prog := celenv.Compile(p)
			err := prog.Err()
			if tt.atRuntime {
				if err != nil {
					t.Fatalf("want a runtime error, got a compile error: %v", err)
				}
				_, err = prog.Evaluate(context.Background(), celenv.Input{Object: trigger.Object})
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, want := range []string{tt.path, tt.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if !tt.atRuntime && !strings.Contains(err.Error(), "GeneratingPolicy/test-policy") {
				t.Errorf("compile error %q does not name the policy", err)
			}
		})
	}
}

// spinning is a variable that runs for a minute or more within the cost
// limit: `in` on a dyn list is charged as one call whatever the length of
// the list, so looking through 16,384 numbers a hundred thousand times costs
// little and takes long.
// It spins only for a trigger whose data.spin is "yes".
var spinning = []string{
	"big", `lists.range(16384)`,
	"spin", `object.?data.spin.orValue('') == 'yes' ? lists.range(100000).map(i, -1 in variables.big).size() : 0`,
}

// TestEvaluationTimeout: an evaluation that runs past its time limit stops
// there, with an error that says so once and names the field path of the
// expression under way; the same policy evaluates other triggers as usual.
func TestEvaluationTimeout(t *testing.T) {
	prog := celenv.Compile(policyWith(false, `generator.Apply("x", variables.spin >= 0 ? [] : [])`, spinning...))
	if err := prog.Err(); err != nil {
		t.Fatal(err)
	}
	spinner := object("v1", "ConfigMap", "team", "spinner")
	spinner.Object["data"] = map[string]any{"spin": "yes"}
	const limit = 200 * time.Millisecond

	start := time.Now()
	_, err := prog.Evaluate(context.Background(), celenv.Input{Object: spinner.Object, Timeout: limit})
	took := time.Since(start)
	want := "spec.generate[0].expression: spec.variables[1].expression: evaluation took longer than its time limit of 200ms"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	// The interrupt is checked every 100 lookups, well under a ms each.
	if took > limit+2*time.Second {
		t.Errorf("the evaluation stopped %v after it started, its limit is %v", took, limit)
	}
	t.Logf("stopped after %v", took)

	steady := object("v1", "ConfigMap", "team", "steady")
	if _, err := prog.Evaluate(context.Background(), celenv.Input{Object: steady.Object, Timeout: limit}); err != nil {
		t.Errorf("a trigger that does not spin: %v", err)
	}
}

// TestCompileBudget: a policy may have MaxExpressionsPerPolicy expressions
// and MaxExpressionBytesPerPolicy bytes of them, template placeholders
// included; one more is refused at the field path of the expression that
// ran over, naming the bound.
func TestCompileBudget(t *testing.T) {
	const generate = `generator.Apply("x", [])`
	// variables returns n variables of one byte ("1"); with size, the first
	// ones are string literals (of at most 60,000 bytes: CEL's own limit on
	// one expression is 100,000) that bring the policy's expressions,
	// generate included, to size bytes.
	variables := func(n, size int) []string {
		var vs []string
		for i := range n {
			vs = append(vs, fmt.Sprintf("v%d", i), "1")
		}
		extra := max(size-len(generate)-n, 0)
		for i := 0; extra > 0; i++ {
			add := min(extra, 60000)
			vs[2*i+1] = "'" + strings.Repeat("x", add-1) + "'"
			extra -= add
		}
		return vs
	}
	placeholders := func(n int) *apiv1.Template {
		value := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n"
		for i := range n {
			value += fmt.Sprintf("  k%d: ((string(%d)))\n", i, i)
		}
		return &apiv1.Template{Interpolate: apiv1.InterpolateCEL, Value: value}
	}
	tests := []struct {
		name      string
		variables []string
		template  *apiv1.Template
		path      string // "" for none: the policy compiles
		want      string
	}{
		{name: "as many expressions as allowed", variables: variables(celenv.MaxExpressionsPerPolicy-1, 0)},
		{name: "one expression more", variables: variables(celenv.MaxExpressionsPerPolicy, 0),
			path: "spec.generate[0].expression", want: "Forbidden: a policy may have at most 256 expressions"},
		{name: "placeholders count", variables: variables(celenv.MaxExpressionsPerPolicy-6, 0), template: placeholders(7),
			path: "spec.generate[0].template.value: document 0, data.k6", want: "at most 256 expressions"},
		{name: "as many bytes as allowed", variables: variables(3, celenv.MaxExpressionBytesPerPolicy)},
		{name: "one byte more", variables: variables(3, celenv.MaxExpressionBytesPerPolicy+1),
			path: "spec.generate[0].expression", want: "at most 131072 bytes together; with this one they have 131073"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policyWith(false, generate, tt.variables...).(*apiv1.GeneratingPolicy)
			if tt.template != nil {
				p.Spec.Generation[0] = apiv1.Generation{Template: tt.template}
			}
			err := celenv.Compile(p).Err()
			if tt.path == "" {
				if err != nil {
					t.Fatalf("a policy within the bounds: %v", err)
				}
				return
			}
			want := "GeneratingPolicy/test-policy: " + tt.path + ": " // the one error
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tt.want) || strings.Count(err.Error(), "Forbidden") != 1 {
				t.Fatalf("error %v, want one %q ... %q", err, want, tt.want)
			}
		})
	}
}
