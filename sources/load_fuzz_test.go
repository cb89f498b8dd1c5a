package sources

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sprout-gitops/sprout/celenv"
)

// FuzzDecodePolicy reads arbitrary bytes as the one policy file of a Git
// revision, through Load as a Git or folder source does. Nothing may panic,
// and Load either rejects the revision with a RejectedError naming the file
// and no policies, or returns policies, each name once, under a revision
// that is the same on a second read. (That they compile is Load's own check:
// compiling again would halve the executions.) The testdata corpus holds a
// YAML bomb and documents nested 10,001 deep; the seeds below add a huge
// document, all of which must be rejected quickly (TestLoadBoundsHostileFiles
// bounds their memory).
func FuzzDecodePolicy(f *testing.F) {
	for _, seed := range []string{
		policyNamed("a"),
		policyNamed("a") + "---\n" + policyNamed("b"),
		policyNamed("same") + "---\n" + policyNamed("same"),
		"---\n# only a comment\n---\n",
		`{"apiVersion": "policies.kyverno.io/v1", "kind": "GeneratingPolicy", "metadata": {"name": "json"}}`,
		strings.Replace(policyNamed("t"), "  - expression: generator.Apply(object.metadata.name, [])\n",
			"  - template:\n      interpolate: cel\n      value: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata: {name: (( object.metadata.name ))}\n", 1),
		hugeDocument(2 << 20),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := fstest.MapFS{"policy.yaml": {Data: data}}
		policies, revision, err := Load(fsys, ".")
		if err != nil {
			var rejected *RejectedError
			if !errors.As(err, &rejected) || !strings.HasPrefix(err.Error(), "policy.yaml: ") {
				t.Fatalf("Load: %T %q does not reject the revision naming policy.yaml", err, err)
			}
			if policies != nil || revision != "" {
				t.Fatalf("a rejected revision returned %d policies and revision %q", len(policies), revision)
			}
			return
		}
		if !strings.HasPrefix(revision, "sha256:") {
			t.Fatalf("revision %q is not a digest", revision)
		}
		refs := policyRefs(policies)
		if sorted := slices.Sorted(slices.Values(refs)); len(slices.Compact(sorted)) != len(refs) {
			t.Fatalf("Load returned a name twice: %v", refs)
		}
		again, revisionAgain, err := Load(fsys, ".")
		if err != nil || revisionAgain != revision || !slices.Equal(policyRefs(again), refs) {
			t.Fatalf("a second Load gives %v, %q, %v; the first gave %v, %q", policyRefs(again), revisionAgain, err, refs, revision)
		}
	})
}

func policyRefs(policies []Policy) []string {
	var refs []string
	for _, p := range policies {
		refs = append(refs, celenv.PolicyRef(p))
	}
	return refs
}
