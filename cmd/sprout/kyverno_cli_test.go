package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// kyvernoTestCopy copies a kyverno-test.yaml's folder to a temporary one
// and returns it, with edit replacing text in a file of the copy.
func kyvernoTestCopy(t *testing.T, from string) (string, func(file, old, new string)) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), filepath.Base(from))
	copyDir(t, from, dir)
	return dir, func(file, old, new string) {
		t.Helper()
		path := filepath.Join(dir, file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), old) {
			t.Fatalf("%s has no %q", file, old)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSproutTestRefusesUnknownFields: a kyverno-test.yaml is decoded
// strictly, as kyverno test decodes it: a field written wrong, at the top
// (polices) or in a result (polcy), fails the file with an error naming
// the field and the file, rather than rows failing with "want pass, got
// skip".
func TestSproutTestRefusesUnknownFields(t *testing.T) {
	for _, tc := range []struct{ name, old, new, field string }{
		{"top", "policies:", "polices:", `unknown field "polices"`},
		{"result", "  policy: team-settings\n  kind: Namespace\n  resources:\n  - scratch",
			"  polcy: team-settings\n  kind: Namespace\n  resources:\n  - scratch", `unknown field "results[1].polcy"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, edit := kyvernoTestCopy(t, "testdata/kyverno-test/data")
			edit("kyverno-test.yaml", tc.old, tc.new)
			out, code := runTestCommand(t, dir)
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s", code, out)
			}
			file := filepath.Join(dir, "kyverno-test.yaml")
			if !strings.Contains(out, file+": "+tc.field) {
				t.Errorf("the output does not name %s and %s:\n%s", file, tc.field, out)
			}
			if strings.Contains(out, "want pass, got skip") {
				t.Errorf("the rows ran:\n%s", out)
			}
		})
	}
}

// TestSproutTestAcceptsKyvernoFields: every field of Kyverno's Test, its
// results (the kind flags, patchedResources, resourceSpecs, the deprecated
// status, resource and namespace) and its values is accepted; a result's
// resourceSpecs name resources as its resources do.
func TestSproutTestAcceptsKyvernoFields(t *testing.T) {
	dir, edit := kyvernoTestCopy(t, "testdata/kyverno-test/data")
	edit("kyverno-test.yaml", "policies:", `name: team-settings
jsonPayload: ""
httpPayloads: []
envoyPayloads: []
targetResources: []
paramResources: []
userinfo: ""
apiCallResponses: []
values:
  globalValues: {request.operation: CREATE}
  policies:
  - name: team-settings
    resources: [{name: payments, values: {a: b}}]
    rules: [{name: r, values: {a: b}, foreachValues: [{a: [b]}]}]
  namespaceSelector: [{name: payments, labels: {team: pay}}]
  subresources: []
  variables: {a: b}
policies:`)
	edit("kyverno-test.yaml", "- isGeneratingPolicy: true\n  policy: team-settings\n  kind: Namespace\n  resources:\n  - scratch\n  result: skip", `- isGeneratingPolicy: true
  isValidatingAdmissionPolicy: false
  isMutatingAdmissionPolicy: false
  isValidatingPolicy: false
  isDeletingPolicy: false
  isImageValidatingPolicy: false
  isMutatingPolicy: false
  patchedResources: ""
  patchedResource: ""
  rule: ""
  policy: team-settings
  kind: Namespace
  resourceSpecs:
  - {version: v1, kind: Namespace, name: scratch}
  status: skip
- policy: team-settings
  kind: Namespace
  resource: scratch
  namespace: ""
  result: skip`)
	testPasses(t, dir,
		"team-settings  Namespace payments  pass  pass  PASS",
		"3 tests, 3 passing, 0 failing")
}

// TestSproutTestCaseSelector: -t/--test-case-selector runs the results
// that match, as kyverno test's: policy, rule and resource wildcards; a
// result naming no rule is not filtered by rule=; a result runs whole when
// one of its resources matches; a malformed selector is an error naming
// the flag.
func TestSproutTestCaseSelector(t *testing.T) {
	for _, tc := range []struct {
		selector string
		want     []string
		not      []string
	}{
		{"policy=gold-*", []string{`gold-quota +ConfigMap shop/settings`, `gold-quota +ConfigMap lab/settings`, `2 tests, 2 passing`},
			[]string{"team-setup", "owner-label"}},
		{"policy=*, rule=require-*, resource=shop*", []string{`team-setup +Namespace shop `, `gold-quota +ConfigMap shop/settings`,
			`owner-label +ConfigMap shop/settings`, `3 tests, 3 passing`}, []string{"lab/", "Namespace lab", "sandbox"}},
		{"policy=*,rule=*,resource=*", []string{"6 tests, 6 passing"}, nil},
	} {
		t.Run(tc.selector, func(t *testing.T) {
			out, _, err := execute("test", parityDir, "-t", tc.selector)
			if err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			for _, w := range tc.want {
				if !regexp.MustCompile(w).MatchString(out) {
					t.Errorf("the output has no %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("the output has %q:\n%s", n, out)
				}
			}
		})
	}
	for _, bad := range []string{"polcy=x", "policy"} {
		_, _, err := execute("test", parityDir, "--test-case-selector", bad)
		if err == nil || !strings.Contains(err.Error(), "--test-case-selector") || !strings.Contains(err.Error(), bad) {
			t.Errorf("-t %q: %v, want an error naming the flag and %q", bad, err, bad)
		}
	}
}

// TestSproutTestRefusesGit: a Git URL as the folder, or --git-branch,
// which kyverno test clones, is refused with a message saying to clone
// first, rather than "no such file".
func TestSproutTestRefusesGit(t *testing.T) {
	for _, args := range [][]string{
		{"test", "https://github.com/kyverno/policies/main"},
		{"test", "-b", "main", "https://github.com/kyverno/policies/best-practices"},
		{"test", "--git-branch", "main", parityDir},
	} {
		_, _, err := execute(args...)
		if err == nil || !strings.Contains(err.Error(), "git clone") {
			t.Errorf("%v: %v, want an error saying to clone first", args, err)
		}
	}
}

// TestSproutTestMixedKinds: a kyverno-test.yaml whose policies mix kinds
// (a ClusterPolicy in the generating policy's file, a ValidatingPolicy in
// another) runs the generating policy's results, and reports each result
// of the others as skipped, naming the policy and its kind, without
// failing the run (--fail-only lists them not, but counts them); a policy
// in the mixed file that is wrong still fails, named by its document.
func TestSproutTestMixedKinds(t *testing.T) {
	const dir = "testdata/kyverno-mixed"
	testPasses(t, dir,
		"require-team-label  Namespace payments  pass  -     SKIPPED",
		"no-scratch          Namespace scratch   fail  -     SKIPPED",
		"team-settings       Namespace payments  pass  pass  PASS",
		"team-settings       Namespace scratch   skip  skip  PASS",
		"ClusterPolicy require-team-label is not a generating policy",
		"ValidatingPolicy no-scratch is not a generating policy",
		"5 tests, 2 passing, 0 failing, 3 skipped (not a generating policy)")

	out, _, err := execute("test", dir, "--fail-only")
	if err != nil || strings.Contains(out, "SKIPPED") || !strings.Contains(out, "0 failing, 3 skipped (not a generating policy)") {
		t.Errorf("--fail-only: %v, want no skipped rows and their count:\n%s", err, out)
	}

	broken, edit := kyvernoTestCopy(t, dir)
	edit("policies.yaml", "  matchConditions:", "  matchCondition:")
	out, code := runTestCommand(t, broken)
	if code != 1 || !strings.Contains(out, `policies.yaml: document 1: GeneratingPolicy team-settings: strict decoding error: unknown field "spec.matchCondition"`) {
		t.Errorf("exit %d, want 1 naming document 1's unknown field:\n%s", code, out)
	}
}

// TestKyvernoTestPolicyBombIsRefused: a kyverno-test.yaml whose policies
// file is the policy bomb fails naming the file, the document and the
// limit, having allocated little: the documents are looked at for their
// kind (to pass over other kinds of policy) only within the decoder's
// bounds.
func TestKyvernoTestPolicyBombIsRefused(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "bomb.yaml", policyBomb())
	writeFile(t, dir, "kyverno-test.yaml", "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nmetadata:\n  name: t\npolicies: [bomb.yaml]\n")
	cmd := exec.Command(sproutBinary(t), "test", dir)
	out, err := cmd.CombinedOutput()
	want := "bomb.yaml: document 0: its aliases expand it to more than 4194304 bytes, the limit; the count passed it at spec.copies[7]"
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("want sprout test to fail with %q, got %v:\n%.2000s", want, err, out)
	}
	if peak := maxRSS(t, cmd); peak > peakBound {
		t.Errorf("sprout test peaked at %d MiB, more than %d MiB", peak>>20, peakBound>>20)
	}
}
