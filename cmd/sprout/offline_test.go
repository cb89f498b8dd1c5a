package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// renderArgs runs `sprout render` in-process with args and returns its
// standard output, standard error and error.
func renderArgs(args ...string) (string, string, error) {
	return execute(append([]string{"render"}, args...)...)
}

// copyToFolder copies files into a new folder, for --policy-dir.
func copyToFolder(t *testing.T, files ...string) string {
	t.Helper()
	folder := t.TempDir()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(folder, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return folder
}

// generatedNamespaces lists the namespaces of the objects render printed,
// in order.
func generatedNamespaces(out string) []string {
	var ns []string
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "  namespace: "); ok {
			ns = append(ns, v)
		}
	}
	return ns
}

// TestRenderAppliesExceptions: PolicyExceptions given with --exceptions (or
// Kyverno's --exception, beside Kyverno's exceptions of ClusterPolicies),
// found among the policy files, or among the triggers with
// --exceptions-with-resources apply as the controller applies them: the
// triggers they except generate nothing and are named on standard error
// with the exception; one that expired or names another policy does
// nothing. Before, render ignored them and generated for every trigger.
func TestRenderAppliesExceptions(t *testing.T) {
	const dir = "testdata/exceptions"
	policy, triggers, exceptions := dir+"/policy.yaml", dir+"/resource.yaml", dir+"/exception.yaml"
	both := copyToFolder(t, policy, exceptions)
	withTriggers := filepath.Join(t.TempDir(), "triggers.yaml")
	data, err := os.ReadFile(triggers)
	if err != nil {
		t.Fatal(err)
	}
	more, err := os.ReadFile(exceptions)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(withTriggers, append(append(data, "---\n"...), more...), 0o644); err != nil {
		t.Fatal(err)
	}
	// Kyverno's exceptions of ClusterPolicies may share the file.
	shared := filepath.Join(t.TempDir(), "exceptions.yaml")
	clusterPolicyException := `apiVersion: kyverno.io/v2
kind: PolicyException
metadata:
  name: for-a-cluster-policy
spec:
  exceptions:
  - policyName: require-labels
    ruleNames: [check]
  match:
    any:
    - resources:
        kinds: [Pod]
---
`
	if err := os.WriteFile(shared, append([]byte(clusterPolicyException), more...), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string][]string{
		"--exceptions":                {"-p", policy, "-r", triggers, "--exceptions", exceptions},
		"-e":                          {"-p", policy, "-r", triggers, "-e", exceptions},
		"--exception":                 {"-p", policy, "-r", triggers, "--exception", exceptions},
		"beside Kyverno's":            {"-p", policy, "-r", triggers, "-e", shared},
		"in the policy folder":        {"-p", both, "-r", triggers},
		"--exceptions-with-resources": {"-p", policy, "-r", withTriggers, "--exceptions-with-resources"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			out, errOut, err := renderArgs(args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			if got := strings.Join(generatedNamespaces(out), ","); got != "production,staging" {
				t.Errorf("generated in %q, want production,staging:\n%s", got, out)
			}
			for _, want := range []string{
				"render: GeneratingPolicy/generate-cm skips Namespace testing: excepted by PolicyException exclude-namespace-by-name (reported as skip)\n",
				"render: GeneratingPolicy/generate-cm skips Namespace audited: excepted by PolicyException audited (reported as pass)\n",
				"render: 1 policy, 4 triggers, 2 objects, 0 errors, 2 evaluations skipped by PolicyExceptions\n",
			} {
				if !strings.Contains(errOut, want) {
					t.Errorf("standard error lacks %q:\n%s", want, errOut)
				}
			}
		})
	}
	t.Run("without exceptions", func(t *testing.T) {
		out, errOut, err := renderArgs("-p", policy, "-r", withTriggers)
		if err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		if got := strings.Join(generatedNamespaces(out), ","); got != "testing,production,staging,audited" {
			t.Errorf("generated in %q: a PolicyException among the triggers is a trigger without --exceptions-with-resources", got)
		}
	})
}

// TestRenderRefusesBadExceptions: an exception that does not compile fails
// the triggers of the policies it names, naming it and the field, as in the
// controller; a policy in an --exceptions file is an error naming the file.
func TestRenderRefusesBadExceptions(t *testing.T) {
	const dir = "testdata/exceptions"
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(broken, []byte(`apiVersion: policies.kyverno.io/v1
kind: PolicyException
metadata:
  name: broken
  namespace: team
spec:
  policyRefs:
  - name: generate-cm
    kind: GeneratingPolicy
  matchConditions:
  - name: typo
    expression: "object.metadata.nam == 'x' +"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := renderArgs("-p", dir+"/policy.yaml", "-r", dir+"/resource.yaml", "-e", broken)
	if err == nil || !strings.Contains(err.Error(), "PolicyException team/broken") || !strings.Contains(err.Error(), "spec.matchConditions[0].expression") {
		t.Fatalf("want an error naming the exception and its field, got %v", err)
	}
	if out != "" || !strings.Contains(errOut, "0 objects, 4 errors") {
		t.Errorf("want nothing generated and an error per trigger; output %q, standard error %q", out, errOut)
	}
	_, _, err = renderArgs("-p", dir+"/policy.yaml", "-r", dir+"/resource.yaml", "-e", dir+"/policy.yaml")
	if err == nil || !strings.Contains(err.Error(), "policy.yaml: GeneratingPolicy generate-cm is not a PolicyException") {
		t.Errorf("a policy given with -e: %v", err)
	}
}

// TestSproutTestAppliesExceptions: a kyverno-test.yaml's exceptions apply
// as in Kyverno: the excepted trigger is a skip, or a pass with nothing
// generated when the exception's reportResult is pass. Before, both
// generated and the skip failed.
func TestSproutTestAppliesExceptions(t *testing.T) {
	testPasses(t, "testdata/exceptions",
		"generate-cm  Namespace testing     skip  skip  PASS",
		"generate-cm  Namespace audited     pass  pass  PASS",
		"generate-cm  Namespace production  pass  pass  PASS",
		"4 tests, 4 passing, 0 failing",
	)
}

// TestRenderServesGlobalContextEntries: GlobalContextEntries among the
// objects render reads serve globalContext.Get as the controller serves
// them: a kubernetesResource entry holds the objects given of its resource
// and namespace, in namespace and name order, with its projections, which
// call Kyverno's JMESPath functions. An apiCall entry is not called and
// reading it is an error saying so; an invalid entry is an error naming
// its field. Before, globalContext.Get found no entry offline.
func TestRenderServesGlobalContextEntries(t *testing.T) {
	const dir = "testdata/globalcontext"
	for name, args := range map[string][]string{
		"with the context objects": {"--context-objects", dir + "/entries.yaml", "--context-objects", dir + "/objects.yaml"},
		"with the triggers":        {"-r", dir + "/entries.yaml", "--context-objects", dir + "/objects.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, err := renderArgs(append([]string{"-p", dir + "/policy.yaml", "-r", dir + "/triggers.yaml"}, args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			for _, want := range []string{"names: CHECKOUT,PAYMENTS\n", "count: \"2\"\n", "namespace: shop\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if !strings.Contains(errOut, "render: 1 policy, 1 trigger, 1 object, 0 errors\n") {
				t.Errorf("the entry counts as a trigger or an object: %s", errOut)
			}
		})
	}
	write := func(content string) string {
		path := filepath.Join(t.TempDir(), "entry.yaml")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	apiCall := write(`apiVersion: kyverno.io/v2
kind: GlobalContextEntry
metadata:
  name: teams
spec:
  apiCall:
    service:
      url: https://teams.example.com/list
  projections:
  - name: names
    jmesPath: "names"
`)
	_, _, err := renderArgs("-p", dir+"/policy.yaml", "-r", dir+"/triggers.yaml", "--context-objects", apiCall)
	if err == nil || !strings.Contains(err.Error(), "GlobalContextEntry teams: an apiCall entry is not called offline") {
		t.Errorf("reading an apiCall entry: want an error saying it is not called, got %v", err)
	}
	invalid := write(`apiVersion: kyverno.io/v2beta1
kind: GlobalContextEntry
metadata:
  name: teams
spec:
  kubernetesResource:
    resource: configmaps
`)
	_, _, err = renderArgs("-p", dir+"/policy.yaml", "-r", dir+"/triggers.yaml", "--context-objects", invalid)
	if err == nil || !strings.Contains(err.Error(), "GlobalContextEntry teams: spec.kubernetesResource.version") {
		t.Errorf("an entry without a version: want an error naming spec.kubernetesResource.version, got %v", err)
	}
}

// TestSproutTestMocksGlobalContext: a kyverno-test.yaml's
// globalContextEntries serve globalContext.Get, the objects of a
// resourceFiles entry through a projection that calls to_upper. Before,
// the entry was not found and the policy failed.
func TestSproutTestMocksGlobalContext(t *testing.T) {
	testPasses(t, "testdata/globalcontext", "team-directory  Namespace shop  pass  pass  PASS")
}

// TestSproutTestFixtureExceptions: a fixture folder's exceptions.yaml
// applies as render's -e does: the trigger it excepts generates nothing,
// which an empty expected.yaml says. Before, the ConfigMap was generated.
func TestSproutTestFixtureExceptions(t *testing.T) {
	const dir = "testdata/exceptions"
	fixture := copyToFolder(t, dir+"/policy.yaml")
	triggers := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: testing\n"
	for name, content := range map[string]string{"triggers.yaml": triggers, "expected.yaml": "# nothing\n"} {
		if err := os.WriteFile(filepath.Join(fixture, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(dir + "/exception.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fixture, "exceptions.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	testPasses(t, fixture, "1 test, 1 passing, 0 failing")
}
