package sources

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// policyBomb is a policy file of 532 KB that anyone who may commit to a
// policy repository can write: a 512 KiB anchor named 2,000 times, a
// gigabyte once its aliases are expanded, within the limits of file and
// document size and within the YAML decoder's own guard.
func policyBomb() string {
	return "apiVersion: policies.kyverno.io/v1\nkind: GeneratingPolicy\nmetadata:\n  name: bomb\n" +
		"  annotations:\n    big: &big " + strings.Repeat("x", 512<<10) + "\n" +
		"spec:\n  copies: [" + strings.TrimSuffix(strings.Repeat("*big, ", 2000), ", ") + "]\n"
}

// aliasedPolicy is policyNamed(name) with its aliases of mappings nested
// levels deep, each level naming the one before three times, merge keys
// included: 3^levels copies of the first mapping, a string of width bytes,
// once expanded.
func aliasedPolicy(name string, levels, width int) string {
	doc := policyNamed(name) + "x-levels:\n  l0: &l0 {k: " + strings.Repeat("x", width) + "}\n"
	for i := 1; i <= levels; i++ {
		doc += fmt.Sprintf("  l%d: &l%d {<<: *l%d, k%d: [*l%d, *l%d]}\n", i, i, i-1, i, i-1, i-1)
	}
	return doc
}

// TestLoadCountsAliasesInBytes: a file whose aliases expand it past
// 4<<20 rejects its revision, naming the file, the
// document, the limit and where in the document the count passed it,
// before anything is expanded: Load allocates a few times the file. Before,
// the policy bomb took Sprout to 4.1 GB.
func TestLoadCountsAliasesInBytes(t *testing.T) {
	limit := fmt.Sprintf("its aliases expand it to more than %d bytes, the limit", apiv1.MaxExpandedDocumentSize)
	merge := policyNamed("merge") + "x-base: &b {k: " + strings.Repeat("x", 64<<10) + "}\nx-items:\n" + strings.Repeat("- {<<: *b, n: 1}\n", 2000)
	for _, tc := range []struct {
		name, content, want string
	}{
		{"a long string named often", policyBomb(), "bomb.yaml: document 0: " + limit + "; the count passed it at spec.copies[7]"},
		// 10^19 copies: the YAML decoder's own guard refused this one.
		{"nested aliases", policyNamed("a") + "---\n" + aliasedPolicy("nested", 40, 1000), "bomb.yaml: document 1: " + limit + "; the count passed it at x-levels.l8.k8[1]"},
		// 6,561 copies of 64 KiB: few enough values for the guard.
		{"nested aliases of a long string", aliasedPolicy("nested", 8, 64<<10), "bomb.yaml: document 0: " + limit + "; the count passed it at x-levels.l4.k4"},
		{"merge keys", merge, "bomb.yaml: document 0: " + limit + "; the count passed it at x-items[63]"},
		{"a PolicyException", "apiVersion: policies.kyverno.io/v1\nkind: PolicyException\nmetadata: {name: e, namespace: team}\nx: &x " +
			strings.Repeat("x", 512<<10) + "\ny: [" + strings.TrimSuffix(strings.Repeat("*x, ", 2000), ", ") + "]\n", "bomb.yaml: document 0: " + limit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "bomb.yaml"), []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			for name, load := range map[string]func() error{
				"Load": func() error {
					_, _, err := Load(fstest.MapFS{"bomb.yaml": {Data: []byte(tc.content)}}, ".")
					return err
				},
				"LoadFolder": func() error { _, _, err := LoadFolder(dir); return err },
			} {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				err := load()
				runtime.ReadMemStats(&after)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: want %q, got %.300v", name, tc.want, err)
				}
				if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
					t.Errorf("%s allocated %d MiB", name, alloc>>20)
				}
			}
		})
	}
}

// TestLoadTakesAliasesWithinTheBudget: a policy whose aliases expand it a
// little loads as it did.
func TestLoadTakesAliasesWithinTheBudget(t *testing.T) {
	policies, _, err := Load(fstest.MapFS{"a.yaml": {Data: []byte(aliasedPolicy("a", 3, 1000))}}, ".")
	if err == nil {
		t.Fatal("want the unknown field x-levels named")
	}
	if !strings.Contains(err.Error(), `unknown field "x-levels"`) {
		t.Fatalf("want the unknown field named, got %v (%d policies)", err, len(policies))
	}
	rules := strings.Replace(policyNamed("b"), "  matchConstraints:\n    resourceRules:\n    - apiGroups: [\"\"]", "  matchConstraints:\n    resourceRules:\n    - &rule\n      apiGroups: [\"\"]", 1)
	rules = strings.Replace(rules, "  generate:", "    - *rule\n  generate:", 1)
	policies, _, err = Load(fstest.MapFS{"b.yaml": {Data: []byte(rules)}}, ".")
	if err != nil || len(policies) != 1 {
		t.Fatalf("want the policy with an aliased rule loaded, got %v\n%s", err, rules)
	}
	if got := len(policies[0].PolicySpec().MatchConstraints.ResourceRules); got != 2 {
		t.Fatalf("%d rules, want 2", got)
	}
}
