package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/manifest"
)

// TestPolicyStatusCounts: `kubectl get gpol -o wide` shows a policy's
// counts in words that agree with them ("1 trigger, 1 object", not "1
// triggers, 1 objects"), and a policy that matches nothing shows 0 in its
// TRIGGERS and OBJECTS columns, not blanks.
func TestPolicyStatusCounts(t *testing.T) {
	cp := startRun(t)
	applyScenario(t, cp, "zk-kafka-address", "policy.yaml", "triggers.yaml")
	policy, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	none := strings.Replace(strings.Replace(string(policy), "name: zk-kafka-address\n", "name: matches-nothing\n", 1), "== 'red'", "== 'no-such-color'", 1)
	objs, err := manifest.Parse([]byte(none))
	if err != nil {
		t.Fatal(err)
	}
	a, err := manifest.NewApplier(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(context.Background(), objs...); err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	row := func(ctx context.Context, name string) map[string]string {
		raw, err := kube.Discovery().RESTClient().Get().AbsPath("/apis/policies.kyverno.io/v1/generatingpolicies/"+name).
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Param("includeObject", "None").DoRaw(ctx)
		var table metav1.Table
		if err != nil || json.Unmarshal(raw, &table) != nil || len(table.Rows) != 1 {
			return nil
		}
		out := map[string]string{}
		for i, c := range table.ColumnDefinitions {
			if i < len(table.Rows[0].Cells) && table.Rows[0].Cells[i] != nil {
				out[c.Name] = fmt.Sprint(table.Rows[0].Cells[i])
			}
		}
		return out
	}
	for _, want := range []struct {
		name string
		cols map[string]string
	}{
		{"matches-nothing", map[string]string{"READY": "True", "TRIGGERS": "0", "OBJECTS": "0"}},
		{"zk-kafka-address", map[string]string{"READY": "True", "TRIGGERS": "1", "OBJECTS": "1", "MESSAGE": "1 trigger, 1 object"}},
	} {
		name, cols := want.name, want.cols
		eventually(t, fmt.Sprintf("%s's row %v", name, cols), func(ctx context.Context) bool {
			got := row(ctx, name)
			for k, v := range cols {
				if got[k] != v {
					return false
				}
			}
			return true
		})
	}
}
