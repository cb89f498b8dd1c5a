package celenv_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
)

// aliasBombs are YAML texts of under 512 KiB whose aliases expand them to
// gigabytes: each has fewer values than a text of its size may have
// without aliases, so a count of values lets it through.
func aliasBombs() map[string]string {
	// A tenant's 196 KiB: one long string named 16,384 times, 16,386
	// values in all.
	aliases := strings.Repeat("- *s\n", 16384)
	tenant := "- &s " + strings.Repeat("x", 196<<10-len(aliases)-len("- &s \n")) + "\n" + aliases
	// A mapping of one long string merged into 2,000 others.
	merge := "base: &b {k: " + strings.Repeat("x", 64<<10) + "}\nitems:\n" + strings.Repeat("- {<<: *b, n: 1}\n", 2000)
	// Aliases of mappings that hold aliases, each level twice the last.
	nested := "m0: &m0 {k: " + strings.Repeat("x", 1000) + "}\n"
	for i := 1; i <= 30; i++ {
		nested += fmt.Sprintf("m%d: &m%d {<<: [*m%d], k%d: [*m%d, *m%d]}\n", i, i, i-1, i, i-1, i-1)
	}
	return map[string]string{"long string named often": tenant, "merge keys": merge, "nested aliases": nested}
}

// TestYAMLParseCountsBytes: yaml.parse refuses a text whose aliases expand
// it past MaxValueBytes, before expanding it, naming the expression, the
// function and the limit; the evaluation allocates a few MiB. Before, the
// tenant's text (16,386 values, under the limit of values) took Sprout past
// 2 GB.
func TestYAMLParseCountsBytes(t *testing.T) {
	for name, doc := range aliasBombs() {
		t.Run(name, func(t *testing.T) {
			alloc, err := evaluateOnce(t, policyWith(true, `generator.Apply("x", variables.doc != null ? [`+generatedCM+`] : [])`,
				"text", "object.data.text", "doc", "yaml.parse(variables.text)"), map[string]any{"text": doc})
			want := fmt.Sprintf("spec.variables[1].expression: yaml.parse: its aliases expand it to more than %d bytes, the limit", celenv.MaxValueBytes)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("want %q, got %v", want, err)
			}
			if alloc > 32<<20 {
				t.Fatalf("refusing it allocated %d MiB", alloc>>20)
			}
		})
	}
}

// TestYAMLParseWithinTheBudget: aliases that stay within the budget still
// expand, merge keys included.
func TestYAMLParseWithinTheBudget(t *testing.T) {
	doc := "base: &b {k: v}\nitems: [*b, {<<: *b, n: 1}]\n"
	_, err := evaluateOnce(t, policyWith(false, `generator.Apply("x", variables.doc.items[1].k == 'v' && variables.doc.items[0].k == 'v' ? [`+generatedCM+`] : [])`,
		"text", "object.data.text", "doc", "yaml.parse(variables.text)"), map[string]any{"text": doc})
	if err != nil {
		t.Fatal(err)
	}
}

// TestJSONUnmarshalIsBoundedByItsText: JSON has no aliases, so what
// json.unmarshal builds is bounded by the text it may read: the densest
// text of MaxParseBytes (a value every two bytes) allocates a few dozen
// times its size, not more. (This held before the byte budgets; the test
// keeps it so.)
func TestJSONUnmarshalIsBoundedByItsText(t *testing.T) {
	for name, text := range map[string]string{
		"numbers":     "[" + strings.Repeat("0,", celenv.MaxParseBytes/2-2) + "0]",
		"empty lists": "[" + strings.Repeat("[],", celenv.MaxParseBytes/3-2) + "[]]",
	} {
		t.Run(name, func(t *testing.T) {
			alloc, err := evaluateOnce(t, policyWith(false, `generator.Apply("x", variables.doc != null ? [`+generatedCM+`] : [])`,
				"text", "object.data.text", "doc", "json.unmarshal(variables.text)"), map[string]any{"text": text})
			t.Logf("%d KiB of text: %d MiB allocated (%v)", len(text)>>10, alloc>>20, err)
			if alloc > 64<<20 {
				t.Fatalf("json.unmarshal of %d KiB allocated %d MiB", len(text)>>10, alloc>>20)
			}
		})
	}
}

// TestTemplateAliasesAreCounted: a template's YAML is held to the same
// budget when the policy compiles, and each evaluation builds no more.
func TestTemplateAliasesAreCounted(t *testing.T) {
	for name, doc := range aliasBombs() {
		t.Run(name, func(t *testing.T) {
			value := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  k: ((variables.team))\nbomb:\n" + indent(doc)
			policy := &apiv1.GeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: templateSpec(value, apiv1.InterpolateCEL)}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			prog := celenv.Compile(policy)
			if err := prog.Err(); err == nil {
				_, err = prog.Evaluate(context.Background(), celenv.Input{Object: object("v1", "Namespace", "", "team-a").Object})
				t.Logf("evaluated: %v", err)
			}
			runtime.ReadMemStats(&after)
			err := prog.Err()
			want := fmt.Sprintf("spec.generate[0].template.value: document 0: Invalid value: its aliases expand it to more than %d bytes, the limit", celenv.MaxValueBytes)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("want %q, got %v", want, err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
				t.Errorf("compiling and evaluating it allocated %d MiB", alloc>>20)
			}
		})
	}
}

// indent indents every line of doc by two spaces.
func indent(doc string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(doc, "\n"), "\n", "\n  ") + "\n"
}

// BenchmarkYAMLParseWithoutAliases measures yaml.parse of text with no
// alias, which the byte count must leave nearly free: without a '*', and
// with '*' that starts no alias (globs, products).
func BenchmarkYAMLParseWithoutAliases(b *testing.B) {
	for name, line := range map[string]string{
		"no star":   "- {name: web, image: nginx, port: 8080}\n",
		"glob star": "- {resources: ['*'], hosts: ['*.example.com'], expr: 'a * b'}\n",
	} {
		b.Run(name, func(b *testing.B) {
			text := strings.Repeat(line, 200)
			p := celenv.Compile(policyWith(false, `generator.Apply("x", size(variables.doc) > 0 ? [`+generatedCM+`] : [])`,
				"doc", "yaml.parse(object.data.text)"))
			if err := p.Err(); err != nil {
				b.Fatal(err)
			}
			trigger := object("v1", "ConfigMap", "team", "cm")
			trigger.Object["data"] = map[string]any{"text": text}
			in := celenv.Input{Object: trigger.Object}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Evaluate(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
