package main

import (
	"os"
	"strings"
	"testing"
)

// TestDiffNamedPolicies: `sprout diff POLICY...` plans only the policies
// named, as NAME, NAMESPACE/NAME or the key diff prints, and a name no
// source holds is an error naming it (and only it), with nothing printed.
// `sprout diff POLICY` used to fail with "unknown command".
func TestDiffNamedPolicies(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	data, err := os.ReadFile("testdata/diff-names/triggers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	applyDocs(t, cp, string(data))
	base := []string{"--kubeconfig", writeKubeconfig(t, cp), "--policy-dir", "testdata/diff-names/policies", "--default-service-account", "", "-o", "table"}
	diff := func(names ...string) (string, string, int, error) {
		return diffCmd(append(base, names...)...)
	}
	rows := map[string]string{
		"welcome":  "created ConfigMap/team-red/welcome GeneratingPolicy/welcome",
		"farewell": "created ConfigMap/team-blue/farewell GeneratingPolicy/farewell",
		"copy":     "created ConfigMap/team-red/settings-copy NamespacedGeneratingPolicy/team-red/copy",
	}
	shown := func(table string) map[string]bool {
		out := map[string]bool{}
		for _, line := range strings.Split(table, "\n") {
			out[strings.Join(strings.Fields(line), " ")] = true
		}
		return out
	}
	for _, c := range []struct {
		names   []string
		want    []string
		summary string
	}{
		{nil, []string{"copy", "farewell", "welcome"}, "diff: 3 policies, 3 triggers, 3 objects, 0 errors"},
		{[]string{"welcome"}, []string{"welcome"}, "diff: 1 policy, 1 trigger, 1 object, 0 errors"},
		{[]string{"team-red/copy", "GeneratingPolicy/farewell"}, []string{"copy", "farewell"}, "diff: 2 policies, 2 triggers, 2 objects, 0 errors"},
		{[]string{"NamespacedGeneratingPolicy/team-red/copy", "team-red/copy"}, []string{"copy"}, "diff: 1 policy, 1 trigger, 1 object, 0 errors"},
	} {
		out, errOut, code, err := diff(c.names...)
		if code != 1 {
			t.Errorf("diff %v: exit %d (%v), want 1:\n%s%s", c.names, code, err, out, errOut)
		}
		for name, row := range rows {
			wanted := strings.Contains(strings.Join(c.want, " "), name)
			if shown(out)[row] != wanted {
				t.Errorf("diff %v: row of %s shown: %v, want %v:\n%s", c.names, name, !wanted, wanted, out)
			}
		}
		if !strings.Contains(errOut, c.summary) {
			t.Errorf("diff %v: standard error %q has no %q", c.names, errOut, c.summary)
		}
	}

	out, errOut, code, err := diff("welcome", "nope", "team-blue/copy")
	if code != 2 || out != "" || strings.Contains(errOut, "diff:") {
		t.Errorf("unknown names: exit %d (want 2), output %q, standard error %q", code, out, errOut)
	}
	if err == nil || !strings.Contains(err.Error(), "nope (GeneratingPolicy/nope), team-blue/copy (NamespacedGeneratingPolicy/team-blue/copy): no such policy in dir:") ||
		strings.Contains(err.Error(), "welcome") || strings.Contains(err.Error(), "farewell") {
		t.Errorf("unknown names: %v, want an error naming nope and team-blue/copy alone", err)
	}
	if _, _, code, err := diff("team-red//copy"); code != 2 || err == nil || !strings.Contains(err.Error(), `policy "team-red//copy"`) {
		t.Errorf("a malformed name: exit %d, %v", code, err)
	}
}

// TestPolicyKeyOf: diff's POLICY arguments read as the policies' keys.
func TestPolicyKeyOf(t *testing.T) {
	for arg, want := range map[string]string{
		"welcome":                  "GeneratingPolicy/welcome",
		"team-red/copy":            "NamespacedGeneratingPolicy/team-red/copy",
		"GeneratingPolicy/welcome": "GeneratingPolicy/welcome",
		"NamespacedGeneratingPolicy/team-red/copy": "NamespacedGeneratingPolicy/team-red/copy",
		"gpol/welcome":                    "NamespacedGeneratingPolicy/gpol/welcome", // a namespace gpol, as Kyverno's tests read it
		"":                                "",
		"a/b/c":                           "",
		"GeneratingPolicy/team-red/copy":  "",
		"NamespacedGeneratingPolicy/copy": "",
		"/welcome":                        "",
	} {
		got, err := policyKeyOf(arg)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("policyKeyOf(%q) = %q, %v; want %q", arg, got, err, want)
		}
	}
}
