package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/fixtures"
)

// Names longer than a label value: their labels hold them encoded.
const (
	longPolicy  = "welcome-every-team-that-joins-the-cluster-with-a-blue-namespace-label"
	longTrigger = "settings-shared-by-every-service-of-the-red-team-in-their-own-namespace"
)

// welcomePolicy does not synchronize, and has a long name.
var welcomePolicy = fixtures.MustPolicyFile("welcome", fixtures.Params{Name: longPolicy, Color: "blue"})

// copyPolicy is a NamespacedGeneratingPolicy with its triggers, ConfigMaps,
// one of them with a long name.
var copyPolicy = fixtures.MustPolicyFile("derived", fixtures.Params{Name: "copy", Namespace: "team-red", App: "source",
	Suffix: "copy", Value: "one", Synchronize: true}) + `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: team-red
  labels: {app: source}
data: {value: "42"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + longTrigger + `
  namespace: team-red
  labels: {app: source}
data: {value: "7"}
`

// inventoryCmd runs `sprout inventory` in-process against kubeconfig and
// returns what it printed on stdout and stderr.
func inventoryCmd(kubeconfig string, args ...string) (string, string, error) {
	return execute(append([]string{"inventory", "--kubeconfig", kubeconfig}, args...)...)
}

// parseTable reads a kubectl-style table by the columns of its header, so
// an empty cell, or one holding spaces, reads right.
func parseTable(text string) []map[string]string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if lines[0] == "" {
		return nil
	}
	header := lines[0]
	var starts []int
	for i := range len(header) {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	names := strings.Fields(header)
	var rows []map[string]string
	for _, line := range lines[1:] {
		row := map[string]string{}
		for j, start := range starts {
			end := len(line)
			if j+1 < len(starts) {
				end = min(starts[j+1], len(line))
			}
			if start < end {
				row[names[j]] = strings.TrimSpace(line[start:end])
			} else {
				row[names[j]] = ""
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// TestInventory runs Sprout on three policies — zk-kafka-address, a
// NamespacedGeneratingPolicy on ConfigMaps, one that does not synchronize,
// with names too long for labels among them — then stops it and changes the cluster behind its back: `sprout inventory`
// tells each object's state before and after, in every output format.
func TestInventory(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	kubeconfig := writeKubeconfig(t, cp)
	// The namespaced policy runs with Sprout's rights, as an operator who
	// opts out of the per-namespace account has it.
	stop := runSprout(t, kubeconfig, "--default-service-account=")
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ctx := context.Background()

	applyScenario(t, cp, "zk-kafka-address", "policy.yaml")
	applyDocs(t, cp, welcomePolicy)
	applyScenario(t, cp, "zk-kafka-address", "triggers.yaml")
	applyDocs(t, cp, copyPolicy)

	summary := []map[string]string{
		{"KIND": "GeneratingPolicy", "NAMESPACE": "", "NAME": longPolicy, "SOURCE": "cluster", "REVISION": "generation 1", "READY": "True", "SYNC": "off", "TRIGGERS": "1", "OBJECTS": "1"},
		{"KIND": "GeneratingPolicy", "NAMESPACE": "", "NAME": "zk-kafka-address", "SOURCE": "cluster", "REVISION": "generation 1", "READY": "True", "SYNC": "on", "TRIGGERS": "1", "OBJECTS": "1"},
		{"KIND": "NamespacedGeneratingPolicy", "NAMESPACE": "team-red", "NAME": "copy", "SOURCE": "cluster", "REVISION": "generation 1", "READY": "True", "SYNC": "on", "TRIGGERS": "2", "OBJECTS": "2"},
	}
	var last string
	eventually(t, "every policy's objects and Ready record in the summary", func(context.Context) bool {
		out, errOut, err := inventoryCmd(kubeconfig)
		last = fmt.Sprintf("%s%s%v", out, errOut, err)
		return err == nil && cmp.Diff(summary, parseTable(out)) == ""
	})
	welcome, err := kube.CoreV1().ConfigMaps("team-blue").Get(ctx, "welcome", metav1.GetOptions{})
	if err != nil || welcome.Labels[sproutv1alpha1.LabelPolicyName] == longPolicy {
		t.Fatalf("the welcome ConfigMap's policy label is not encoded: the test no longer covers long names (%v)", err)
	}

	// expectRows checks the table `sprout inventory args...` prints.
	expectRows := func(t *testing.T, want []map[string]string, args ...string) {
		t.Helper()
		out, errOut, err := inventoryCmd(kubeconfig, args...)
		if err != nil {
			t.Fatalf("sprout inventory %v: %v\n%s", args, err, errOut)
		}
		if diff := cmp.Diff(want, parseTable(out)); diff != "" {
			t.Errorf("sprout inventory %v (-want +got):\n%s\n%s", args, diff, out)
		}
	}
	objectRow := func(trigger, namespace, name, state string) map[string]string {
		return map[string]string{"TRIGGER": trigger, "KIND": "ConfigMap", "NAMESPACE": namespace, "NAME": name, "STATE": state}
	}
	zkSynced := []map[string]string{objectRow("Namespace/team-red", "team-red", "zk-kafka-address", "synced")}

	t.Run("summary", func(t *testing.T) {
		out, _, err := inventoryCmd(kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(summary, parseTable(out)); diff != "" {
			t.Errorf("summary (-want +got):\n%s\n%s", diff, out)
		}
		if !strings.HasPrefix(out, "KIND   ") || !strings.Contains(out, longPolicy+"   cluster") {
			t.Errorf("the columns are not aligned three spaces apart, as kubectl's:\n%s", out)
		}
	})
	t.Run("namespace filter", func(t *testing.T) {
		expectRows(t, summary[2:], "-n", "team-red")
		out, errOut, err := inventoryCmd(kubeconfig, "-n", "team-blue")
		if err != nil || out != "" || !strings.Contains(errOut, "no PolicyInventory records of policies in namespace team-blue") {
			t.Errorf("-n team-blue: %v, stdout %q, stderr %q", err, out, errOut)
		}
	})
	t.Run("one policy", func(t *testing.T) {
		for _, arg := range []string{"zk-kafka-address", "GeneratingPolicy/zk-kafka-address", "gpol/zk-kafka-address"} {
			expectRows(t, zkSynced, arg)
		}
		copies := []map[string]string{
			objectRow("ConfigMap/team-red/settings", "team-red", "settings-copy", "synced"),
			objectRow("ConfigMap/team-red/"+longTrigger, "team-red", longTrigger+"-copy", "synced"),
		}
		expectRows(t, copies, "-n", "team-red", "copy")
		expectRows(t, copies, "ngpol/copy", "-n", "team-red")
		expectRows(t, []map[string]string{objectRow("Namespace/team-blue", "team-blue", "welcome", "generated-once")}, longPolicy)
	})

	redNamespace, err := kube.CoreV1().Namespaces().Get(ctx, "team-red", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// zkJSON is what -o json prints for zk-kafka-address, the Ready message aside.
	zkJSON := func(state string) string {
		return fmt.Sprintf(`{"policies": [{
		  "kind": "GeneratingPolicy", "name": "zk-kafka-address", "source": "cluster", "revision": "generation 1",
		  "ready": "True", "reason": "Reconciled", "synchronize": true,
		  "triggers": [{
		    "apiVersion": "v1", "kind": "Namespace", "name": "team-red", "uid": %q, "exists": true,
		    "objects": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "team-red", "name": "zk-kafka-address", "state": %q}]
		  }]
		}]}`, redNamespace.UID, state)
	}
	t.Run("json and yaml", func(t *testing.T) {
		expectJSON(t, kubeconfig, zkJSON("synced"), "zk-kafka-address", "-o", "json")
		expectJSON(t, kubeconfig, zkJSON("synced"), "zk-kafka-address", "-o", "yaml")
		out, _, err := inventoryCmd(kubeconfig, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var all inventoryReport
		if err := json.Unmarshal([]byte(out), &all); err != nil {
			t.Fatalf("-o json: %v\n%s", err, out)
		}
		var states []string
		for _, p := range all.Policies {
			for _, tr := range p.Triggers {
				for _, o := range tr.Objects {
					states = append(states, policyID(p.ref())+" "+tr.ref()+" "+o.ref()+" "+string(o.State))
				}
			}
		}
		want := []string{
			"GeneratingPolicy/" + longPolicy + " Namespace/team-blue ConfigMap/team-blue/welcome generated-once",
			"GeneratingPolicy/zk-kafka-address Namespace/team-red ConfigMap/team-red/zk-kafka-address synced",
			"NamespacedGeneratingPolicy/team-red/copy ConfigMap/team-red/settings ConfigMap/team-red/settings-copy synced",
			"NamespacedGeneratingPolicy/team-red/copy ConfigMap/team-red/" + longTrigger + " ConfigMap/team-red/" + longTrigger + "-copy synced",
		}
		if diff := cmp.Diff(want, states); diff != "" {
			t.Errorf("the summary's -o json (-want +got):\n%s", diff)
		}
	})
	t.Run("unknown policy", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"nope"}, "no PolicyInventory for GeneratingPolicy/nope"},
			{[]string{"-n", "team-red", "nope"}, "no PolicyInventory for NamespacedGeneratingPolicy/team-red/nope"},
			{[]string{"ngpol/copy"}, "ngpol/copy is namespaced: give its namespace with -n"},
			{[]string{"deployment/copy"}, `"deployment" is not a GeneratingPolicy or NamespacedGeneratingPolicy`},
			{[]string{"-o", "wide"}, `--output: "wide" is not table, yaml or json`},
		} {
			if _, _, err := inventoryCmd(kubeconfig, tc.args...); err == nil || err.Error() != tc.want {
				t.Errorf("sprout inventory %v: error %v, want %q", tc.args, err, tc.want)
			}
		}
		cmd := exec.Command(sproutBinary(t), "inventory", "--kubeconfig", kubeconfig, "nope")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		var exit *exec.ExitError
		if err := cmd.Run(); !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("sprout inventory nope: %v, want exit status 1", err)
		}
		if !strings.Contains(stderr.String(), "Error: no PolicyInventory for GeneratingPolicy/nope") {
			t.Errorf("sprout inventory nope printed %q", stderr.String())
		}
	})
	if t.Failed() {
		t.Fatalf("before the changes behind Sprout's back, the last summary was:\n%s", last)
	}

	// Behind Sprout's back: it would revert and prune at once.
	stop()
	cms := kube.CoreV1().ConfigMaps("team-red")
	update := func(namespace, name, manager string, change func(*corev1.ConfigMap)) {
		t.Helper()
		cm, err := kube.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(cm)
		if _, err := kube.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: manager}); err != nil {
			t.Fatal(err)
		}
	}

	update("team-red", "zk-kafka-address", "kubectl-label", func(cm *corev1.ConfigMap) { cm.Labels["team"] = "red" })
	t.Run("a label added by another writer is no drift", func(t *testing.T) {
		expectRows(t, zkSynced, "zk-kafka-address")
	})

	update("team-red", "zk-kafka-address", "kubectl-edit", func(cm *corev1.ConfigMap) { cm.Data["ZK_ADDRESS"] = "elsewhere:2181" })
	update("team-blue", "welcome", "kubectl-edit", func(cm *corev1.ConfigMap) { cm.Data["team"] = "someone else" })
	if err := cms.Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("drifted, orphaned, generated once", func(t *testing.T) {
		expectRows(t, []map[string]string{objectRow("Namespace/team-red", "team-red", "zk-kafka-address", "drifted")}, "zk-kafka-address")
		expectRows(t, []map[string]string{
			objectRow("ConfigMap/team-red/settings", "team-red", "settings-copy", "orphaned"),
			objectRow("ConfigMap/team-red/"+longTrigger, "team-red", longTrigger+"-copy", "synced"),
		}, "-n", "team-red", "copy")
		expectRows(t, []map[string]string{objectRow("Namespace/team-blue", "team-blue", "welcome", "generated-once")}, longPolicy)
		expectJSON(t, kubeconfig, zkJSON("drifted"), "zk-kafka-address", "-o", "json")

		out, _, err := inventoryCmd(kubeconfig, "-n", "team-red", "copy", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var report inventoryReport
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatal(err)
		}
		if tr := report.Policies[0].Triggers; len(tr) != 2 || tr[0].Name != "settings" || tr[0].Exists || !tr[1].Exists {
			t.Errorf("the triggers: %+v, want settings, not existing, then the other, existing", tr)
		}
	})
}

// expectJSON checks that `sprout inventory args...` prints want (JSON), read
// as JSON or YAML alike; the Ready message, reconcile's wording, is left out.
func expectJSON(t *testing.T, kubeconfig, want string, args ...string) {
	t.Helper()
	out, errOut, err := inventoryCmd(kubeconfig, args...)
	if err != nil {
		t.Fatalf("sprout inventory %v: %v\n%s", args, err, errOut)
	}
	data, err := yaml.YAMLToJSON([]byte(out))
	if err != nil {
		t.Fatalf("sprout inventory %v: %v\n%s", args, err, out)
	}
	var got, wanted map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("sprout inventory %v: %v\n%s", args, err, out)
	}
	if err := json.Unmarshal([]byte(want), &wanted); err != nil {
		t.Fatal(err)
	}
	policies, _ := got["policies"].([]any)
	for _, p := range policies {
		if p, ok := p.(map[string]any); ok {
			delete(p, "message")
		}
	}
	if diff := cmp.Diff(wanted, got); diff != "" {
		t.Errorf("sprout inventory %v (-want +got):\n%s\n%s", args, diff, out)
	}
}

func TestParsePolicyArg(t *testing.T) {
	gpol := func(name string) sproutv1alpha1.PolicyReference {
		return sproutv1alpha1.PolicyReference{Kind: apiv1.GeneratingPolicyKind, Name: name}
	}
	ngpol := func(namespace, name string) sproutv1alpha1.PolicyReference {
		return sproutv1alpha1.PolicyReference{Kind: apiv1.NamespacedGeneratingPolicyKind, Namespace: namespace, Name: name}
	}
	tests := []struct {
		arg, namespace string
		want           sproutv1alpha1.PolicyReference
		err            string
	}{
		{arg: "zk", want: gpol("zk")},
		{arg: "GeneratingPolicy/zk", want: gpol("zk")},
		{arg: "generatingpolicies.policies.kyverno.io/zk", want: gpol("zk")},
		{arg: "gpol/zk", namespace: "team", want: gpol("zk")},
		{arg: "zk", namespace: "team", want: ngpol("team", "zk")},
		{arg: "NamespacedGeneratingPolicy/zk", namespace: "team", want: ngpol("team", "zk")},
		{arg: "ngpol/zk", err: "ngpol/zk is namespaced: give its namespace with -n"},
		{arg: "cm/zk", err: `"cm" is not a GeneratingPolicy or NamespacedGeneratingPolicy`},
		{arg: "gpol/", err: `"gpol/" is not NAME or TYPE/NAME`},
		{arg: "gpol/team/zk", err: `"gpol/team/zk" is not NAME or TYPE/NAME`},
	}
	for _, tt := range tests {
		t.Run(tt.arg+" -n "+tt.namespace, func(t *testing.T) {
			got, err := parsePolicyArg(tt.arg, tt.namespace)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
