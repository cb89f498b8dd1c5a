package sources

import (
	"strings"
	"testing"
	"testing/fstest"
)

const goodPolicy = `apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata:
  name: %s
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["namespaces"]
  generate:
  - expression: generator.Apply(object.metadata.name, [])
`

func policyNamed(name string) string { return strings.Replace(goodPolicy, "%s", name, 1) }

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
		{name: "a wrong type names its field",
			files:   map[string]string{"a.yaml": strings.Replace(policyNamed("a"), "  generate:", "  evaluation:\n    synchronize: true\n  generate:", 1)},
			wantErr: []string{"a.yaml", "spec.evaluation.synchronize: bool where an object is wanted"}},
		{name: "a name twice rejects the revision",
			files:   map[string]string{"a.yaml": policyNamed("same"), "b.yaml": policyNamed("same")},
			wantErr: []string{"b.yaml: GeneratingPolicy/same is also defined in a.yaml"}},
		{name: "a file that is not a policy rejects the revision",
			files:   map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"},
			wantErr: []string{"a.yaml", "is not one of policies.kyverno.io"}},
		{name: "an oversize file rejects the revision",
			files:   map[string]string{"big.yaml": "# " + strings.Repeat("x", maxFileSize)},
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
