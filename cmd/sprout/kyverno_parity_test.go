package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sprout-gitops/sprout/internal/manifest"
)

// parityDir is a kyverno-test.yaml that uses what Kyverno's CLI reads for
// generating policies: a clone source only its clusterResources (a
// ClusterResource) hold, a Context, a values file labelling the triggers'
// Namespaces, and exceptions, one of which lets the policy run and read
// exceptions.allowedValues.
const parityDir = "testdata/kyverno-parity"

// copyParity copies parityDir, its CRDs too, to a new folder name, which
// it returns, for a test to edit.
func copyParity(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	copyDir(t, parityDir, dir)
	copyDir(t, filepath.Join(parityDir, "crds"), filepath.Join(dir, "crds"))
	return dir
}

// appendToTest appends text to dir's kyverno-test.yaml.
func appendToTest(t *testing.T, dir, text string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "kyverno-test.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSproutTestKyvernoParity: every result holds as kyverno test computes
// it. team-setup clones a Secret found only in clusterResources, keeps the
// ownerReferences of the ConfigMap it builds (generatedResource files hold
// them) and writes a Team with no namespace, cluster-scoped by the CRD the
// ClusterResource names; shop is large by its exception's allowedValues; sandbox is
// skipped by the exception without values; gold-quota runs in shop alone,
// the Namespace the values label tier: gold; owner-label fails: error.
func TestSproutTestKyvernoParity(t *testing.T) {
	testPasses(t, parityDir,
		"team-setup   Namespace shop           pass   pass   PASS",
		"team-setup   Namespace lab            pass   pass   PASS",
		"team-setup   Namespace sandbox        skip   skip   PASS",
		"gold-quota   ConfigMap shop/settings  pass   pass   PASS",
		"gold-quota   ConfigMap lab/settings   skip   skip   PASS",
		"owner-label  ConfigMap shop/settings  error  error  PASS",
		"6 tests, 6 passing, 0 failing",
	)
}

// TestSproutTestKyvernoParityFails: a generatedResource file without the
// ownerReferences Kyverno keeps fails with a diff naming them; a result that
// wants fail holds for an evaluation that errs, as in kyverno test, and one
// that wants error for a trigger that passes fails.
func TestSproutTestKyvernoParityFails(t *testing.T) {
	dir := copyParity(t, "parity")
	edit := func(file, from, to string) {
		t.Helper()
		path := filepath.Join(dir, file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), from) {
			t.Fatalf("%s has no %q", file, from)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(data), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("generated-shop.yaml", `  ownerReferences:
  - apiVersion: v1
    kind: Namespace
    name: shop
    uid: 7f1c7b4e-0000-4000-8000-000000000001
`, "")
	edit("kyverno-test.yaml", "result: error", "result: fail")
	edit("kyverno-test.yaml", "resources: [lab/settings]\n  result: skip", "resources: [lab/settings]\n  result: error")

	testFails(t, dir,
		`team-setup +Namespace shop +pass +pass +FAIL`,
		`(?s)FAIL \S+ team-setup Namespace shop:\nv1 ConfigMap/shop/team-info differs:.*\n\+  ownerReferences:`,
		`owner-label +ConfigMap shop/settings +fail +error +PASS`,
		`gold-quota +ConfigMap lab/settings +error +skip +FAIL`,
		`6 tests, 4 passing, 2 failing`,
	)
}

// TestRenderKeepsOwnerReferences: render prints the ownerReferences a
// policy writes on an object it builds, as Kyverno's CLI does, and drops
// those of a clone's source, which are not the clone's; its
// --context-objects take Kyverno's Context and ClusterResource files.
func TestRenderKeepsOwnerReferences(t *testing.T) {
	out, errOut, err := execute("render", "-p", filepath.Join(parityDir, "policies.yaml"),
		"-r", filepath.Join(parityDir, "resources.yaml"), "-e", filepath.Join(parityDir, "exceptions.yaml"),
		"--context-objects", filepath.Join(parityDir, "context.yaml")+","+filepath.Join(parityDir, "clusterresources.yaml"))
	// owner-label fails for the ConfigMaps without an owner label, and for
	// nothing else.
	if err == nil || !strings.Contains(err.Error(), "owner-label") || strings.Contains(err.Error(), "team-setup") {
		t.Fatalf("want owner-label's errors alone, got %v\n%s", err, errOut)
	}
	objs, perr := manifest.Parse([]byte(out))
	if perr != nil {
		t.Fatal(perr)
	}
	find := func(kind, namespace, name string) *unstructured.Unstructured {
		t.Helper()
		for _, o := range objs {
			if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
				return o
			}
		}
		t.Fatalf("render printed no %s %s/%s:\n%s", kind, namespace, name, out)
		return nil
	}
	info := find("ConfigMap", "shop", "team-info")
	refs := info.GetOwnerReferences()
	if len(refs) != 1 || refs[0].Kind != "Namespace" || refs[0].Name != "shop" || refs[0].UID != "7f1c7b4e-0000-4000-8000-000000000001" {
		t.Errorf("team-info's ownerReferences: %+v, want the Namespace shop", refs)
	}
	if size, _, _ := unstructured.NestedString(info.Object, "data", "size"); size != "large" {
		t.Errorf("team-info's size %q, want large, from the exception's allowedValues", size)
	}
	if refs := find("Secret", "shop", "registry-credentials").GetOwnerReferences(); len(refs) != 0 {
		t.Errorf("the clone kept its source's ownerReferences: %+v", refs)
	}
}

// TestSproutTestRefusesChecks: a kyverno-test.yaml's checks (assertions on
// Kyverno's rule responses) fail its test, naming them, rather than pass
// unrun.
func TestSproutTestRefusesChecks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checks")
	copyDir(t, "testdata/kyverno-test/data", dir)
	appendToTest(t, dir, "checks:\n- match: {policy: {name: team-settings}}\n  assert: {status: pass}\n")
	out, code := runTestCommand(t, dir)
	if code != 1 || !strings.Contains(out, "checks: 1 assertions on Kyverno's rule responses, which sprout test cannot run") {
		t.Errorf("exit %d, want 1 and the checks named:\n%s", code, out)
	}
}

// TestSproutTestInlineValues: a test's inline values take the place of its
// variables file, as in Kyverno: its namespaces label lab tier: gold, and
// shop, which only the file labels, is gold no more.
func TestSproutTestInlineValues(t *testing.T) {
	dir := copyParity(t, "values")
	appendToTest(t, dir, "values:\n  namespaces:\n  - metadata: {name: lab, labels: {tier: gold}}\n")
	testFails(t, dir,
		`gold-quota +ConfigMap shop/settings +pass +skip +FAIL`,
		`gold-quota +ConfigMap lab/settings +skip +pass +FAIL`,
		`6 tests, 4 passing, 2 failing`,
	)
}

// TestSproutTestSearchesHiddenFolders: kyverno test finds a
// kyverno-test.yaml in every folder below the one it is given, hidden ones
// too (Kyverno keeps suites in .kyverno-tests/ next to its chainsaw
// tests), and so does sprout test; only .git, which never holds a test, is
// left out.
func TestSproutTestSearchesHiddenFolders(t *testing.T) {
	root := filepath.Join(t.TempDir(), "suites")
	copyDir(t, "testdata/kyverno-test/clone", filepath.Join(root, "clone"))
	copyDir(t, "testdata/kyverno-test/data", filepath.Join(root, "team", ".kyverno-tests"))
	broken := filepath.Join(root, ".git", "suite")
	copyDir(t, "testdata/kyverno-test/data", broken)
	if err := os.WriteFile(filepath.Join(broken, "kyverno-test.yaml"), []byte("not: a test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testPasses(t, root,
		"copy-pull-secret  Namespace shop      pass  pass  PASS",
		"team-settings     Namespace payments  pass  pass  PASS",
		"3 tests, 3 passing, 0 failing",
	)
}

// TestSproutTestFailsAResultOfNoPolicy: a result naming a policy the test
// does not hold fails, as kyverno test fails it (not found), even when it
// wants skip: a misspelt name must not pass for a policy that skipped.
func TestSproutTestFailsAResultOfNoPolicy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo")
	copyDir(t, "testdata/kyverno-test/data", dir)
	appendToTest(t, dir, `- policy: team-setting
  kind: Namespace
  resources: [scratch]
  result: skip
- policy: default/team-settings
  kind: Namespace
  resources: [scratch]
  result: skip
`)
	testFails(t, dir,
		`(?m)^\S+ +team-setting +Namespace scratch +skip +- +FAIL`,
		`(?m)^\S+ +default/team-settings +Namespace scratch +skip +- +FAIL`,
		`no policy team-setting among the test's policies`,
		`4 tests, 2 passing, 2 failing`,
	)
}

// TestSproutTestTakesKyvernoTestFlags: the flags of a kyverno test command
// line work: --file-name (-f) names the test files, --fail-only lists the
// failing rows alone, and --remove-color and --detailed-results are
// accepted (sprout test prints no colour, and every failure with why).
func TestSproutTestTakesKyvernoTestFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "named")
	copyDir(t, "testdata/kyverno-test/data", dir)
	data, err := os.ReadFile(filepath.Join(dir, "kyverno-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, "- {policy: team-settings, kind: Namespace, resources: [scratch], result: pass}\n"...)
	if err := os.WriteFile(filepath.Join(dir, "gpol-test.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "kyverno-test.yaml")); err != nil {
		t.Fatal(err)
	}
	out, _, err := execute("test", "-f", "gpol-test.yaml", "--fail-only", "--remove-color", "--detailed-results", dir)
	if code := exitCode(err); code != 1 {
		t.Fatalf("exit %d (%v), want 1:\n%s", code, err, out)
	}
	outputMatches(t, out,
		`(?m)^\S+gpol-test.yaml +team-settings +Namespace scratch +pass +skip +FAIL$`,
		`3 tests, 2 passing, 1 failing`,
	)
	if strings.Contains(out, "PASS") {
		t.Errorf("--fail-only listed a passing row:\n%s", out)
	}
}

// TestSproutTestAnnotationsAsKyvernoGeneratesThem: kyverno test drops every
// annotation of the objects it generates, so a generatedResource written
// for it holds none, and passes here too though the policy writes some;
// annotations a generatedResource does hold are compared.
func TestSproutTestAnnotationsAsKyvernoGeneratesThem(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "annotated")
	files := map[string]string{
		"policy.yaml": `apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata: {name: annotated}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [namespaces]}
  generate:
  - expression: >-
      generator.Apply(object.metadata.name, [{"apiVersion": dyn("v1"), "kind": dyn("ConfigMap"),
        "metadata": dyn({"name": "cfg", "annotations": {"example.com/owner": object.metadata.name}}),
        "data": dyn({"a": "b"})}])
`,
		"resources.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: lab}\n",
		"shop.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: shop}\ndata: {a: b}\n",
		"lab.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: lab, annotations: {example.com/owner: shop}}\ndata: {a: b}\n",
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: annotated}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: annotated, kind: Namespace, resources: [shop], generatedResource: shop.yaml, result: pass}
- {policy: annotated, kind: Namespace, resources: [lab], generatedResource: lab.yaml, result: pass}
`,
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testFails(t, dir,
		`annotated +Namespace shop +pass +pass +PASS`,
		`annotated +Namespace lab +pass +pass +FAIL`,
		`(?s)v1 ConfigMap/lab/cfg differs:.*-    example.com/owner: shop\n\+    example.com/owner: lab`,
	)
}
