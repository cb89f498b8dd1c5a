package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/sprout-gitops/sprout/fixtures"
)

// TestPolicyStatusCounts: `kubectl get gpol -o wide` shows a policy's
// counts in words that agree with them ("1 trigger, 1 object", not "1
// triggers, 1 objects"), and a policy that matches nothing shows 0 in its
// TRIGGERS and OBJECTS columns, not blanks.
func TestPolicyStatusCounts(t *testing.T) {
	t.Parallel()
	cp := startRun(t)
	applyScenario(t, cp, "zk-kafka-address", "policy.yaml", "triggers.yaml")
	policy, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	none := strings.Replace(strings.Replace(string(policy), "name: zk-kafka-address\n", "name: matches-nothing\n", 1), "== 'red'", "== 'no-such-color'", 1)
	applyDocs(t, cp, none)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	for _, want := range []struct {
		name string
		cols map[string]string
	}{
		{"matches-nothing", map[string]string{"READY": "True", "TRIGGERS": "0", "OBJECTS": "0"}},
		{"zk-kafka-address", map[string]string{"READY": "True", "TRIGGERS": "1", "OBJECTS": "1", "MESSAGE": "1 trigger, 1 object"}},
	} {
		name, cols := want.name, want.cols
		eventually(t, fmt.Sprintf("%s's row %v", name, cols), func(ctx context.Context) bool {
			got := tableRow(ctx, kube, "/apis/policies.kyverno.io/v1/generatingpolicies/"+name)
			for k, v := range cols {
				if got[k] != v {
					return false
				}
			}
			return true
		})
	}
}
