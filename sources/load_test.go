package sources

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/fixtures"
)

// policyNamed is the least valid policy, testpolicies/namespace-noop.yaml:
// triggered by Namespaces, generating nothing.
func policyNamed(name string) string {
	return fixtures.MustPolicyFile("namespace-noop", fixtures.Params{Name: name})
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    []string // policy names, in order
		wantErr []string // all must appear in the error
	}{
		{name: "every yaml file, recursively, several documents each",
			files: map[string]string{
				"a.yaml":          policyNamed("a"),
				"nested/b.yml":    policyNamed("b") + "---\n" + policyNamed("c"),
				"README.md":       "not a policy",
				".git/config.yml": "ignored: [",
			},
			want: []string{"a", "b", "c"}},
		{name: "bad YAML rejects the revision",
			files:   map[string]string{"a.yaml": policyNamed("a"), "b.yaml": "kind: [GeneratingPolicy\n"},
			wantErr: []string{"b.yaml", "document 0"}},
		{name: "bad CEL rejects the revision",
			files:   map[string]string{"a.yaml": policyNamed("a"), "b.yaml": strings.Replace(policyNamed("b"), "generator.Apply(", "generator.Apply((", 1)},
			wantErr: []string{"b.yaml", "GeneratingPolicy/b", "spec.generate[0].expression"}},
		{name: "missing matchConstraints rejects the revision",
			files:   map[string]string{"a.yaml": strings.Replace(policyNamed("a"), "  matchConstraints:\n    resourceRules:\n    - apiGroups: [\"\"]\n      apiVersions: [\"v1\"]\n      operations: [\"CREATE\"]\n      resources: [\"namespaces\"]\n", "", 1)},
			wantErr: []string{"a.yaml", "spec.matchConstraints.resourceRules: Required value"}},
		{name: "unknown field rejects the revision",
			files:   map[string]string{"a.yaml": strings.Replace(policyNamed("a"), "  generate:", "  generat:", 1)},
			wantErr: []string{"a.yaml", `unknown field "spec.generat"`}},
		{name: "a key written twice rejects the revision",
			files:   map[string]string{"a.yaml": strings.Replace(policyNamed("a"), "spec:\n", "spec:\n  generate: []\n", 1)},
			wantErr: []string{"a.yaml", "document 0", `"generate" already set`}},
		{name: "a wrong type names its field",
			files:   map[string]string{"a.yaml": strings.Replace(policyNamed("a"), "  generate:", "  evaluation:\n    synchronize: true\n  generate:", 1)},
			wantErr: []string{"a.yaml", "spec.evaluation.synchronize: bool where an object is wanted"}},
		{name: "a name twice rejects the revision",
			files:   map[string]string{"a.yaml": policyNamed("same"), "b.yaml": policyNamed("same")},
			wantErr: []string{"b.yaml: GeneratingPolicy/same is also defined in a.yaml"}},
		{name: "a name twice in one file rejects the revision",
			files:   map[string]string{"a.yaml": policyNamed("same") + "---\n" + policyNamed("same")},
			wantErr: []string{"a.yaml: GeneratingPolicy/same is also defined in a.yaml"}},
		{name: "a file that is not a policy rejects the revision",
			files:   map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"},
			wantErr: []string{"a.yaml", "is not one of policies.kyverno.io"}},
		{name: "an oversize file rejects the revision",
			files:   map[string]string{"big.yaml": "# " + strings.Repeat("x", MaxFileSize)},
			wantErr: []string{"big.yaml", "more than the"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, content := range tt.files {
				fsys[name] = &fstest.MapFile{Data: []byte(content)}
			}
			policies, revision, err := Load(fsys, ".")
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("want an error, got %d policies", len(policies))
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				if policies != nil || revision != "" {
					t.Error("a rejected revision still returned policies")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range policies {
				got = append(got, p.GetName())
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("policies %v, want %v", got, tt.want)
			}
			_, again, _ := Load(fsys, ".")
			if !strings.HasPrefix(revision, "sha256:") || again != revision {
				t.Errorf("revision %q is not a stable digest (%q)", revision, again)
			}
		})
	}
}

func TestIdentifyIsStable(t *testing.T) {
	load := func(content string) (string, int64) {
		ps, _, err := Load(fstest.MapFS{"a.yaml": {Data: []byte(content)}}, ".")
		if err != nil {
			t.Fatal(err)
		}
		identify(ps[0], "dir:x")
		return string(ps[0].GetUID()), ps[0].GetGeneration()
	}
	uid1, gen1 := load(policyNamed("a"))
	uid2, gen2 := load(policyNamed("a"))
	uid3, gen3 := load(strings.Replace(policyNamed("a"), "CREATE", "UPDATE", 1))
	if uid1 != uid2 || gen1 != gen2 {
		t.Error("the same policy got another identity")
	}
	if uid3 != uid1 || gen3 == gen1 {
		t.Error("an edited policy must keep its UID and change its generation")
	}
}

// TestLoadBoundsHostileFiles reads files written to exhaust the reader: each
// must be rejected with an error naming file and document, allocating little
// (issue #8, item 11). Before documents were bounded, such a list took
// seconds and more memory than Sprout's limit to decode.
func TestLoadBoundsHostileFiles(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantErr []string
	}{
		{name: "billion laughs", content: billionLaughs(),
			wantErr: []string{"bomb.yaml: document 0: ", "its aliases expand it to more than"}},
		{name: "nested 10,001 deep", content: "x: " + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + "\n",
			wantErr: []string{"bomb.yaml: document 0: ", "exceeded max depth of 10000"}},
		{name: "a 3 MiB document", content: policyNamed("a") + "---\n" + hugeDocument(3<<20),
			wantErr: []string{"bomb.yaml: document 1: ", fmt.Sprintf("bytes, more than the %d a policy may have", apiv1.MaxDocumentSize)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{"bomb.yaml": {Data: []byte(tt.content)}}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, _, err := Load(fsys, ".")
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("Load allocated %d MiB", alloc>>20)
			}
		})
	}
}

// hugeDocument is a policy of about size bytes, almost all of it one flow list:
// the densest YAML in nodes per byte.
func hugeDocument(size int) string {
	head := "apiVersion: policies.kyverno.io/v1\nkind: GeneratingPolicy\nmetadata: {name: huge}\nx: ["
	var b bytes.Buffer
	b.WriteString(head)
	for b.Len() < size-2 {
		b.WriteString("1,")
	}
	b.WriteString("1]")
	return b.String()
}

// billionLaughs is the classic YAML bomb: nine levels of ten aliases to the
// level below, 10^9 strings once expanded.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("apiVersion: policies.kyverno.io/v1\nkind: GeneratingPolicy\nmetadata: {name: lol}\n")
	b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	return b.String()
}
