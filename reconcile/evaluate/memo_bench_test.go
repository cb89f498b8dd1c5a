package evaluate

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// BenchmarkEvaluateTrigger measures one trigger's evaluation in a sync, as
// the controller runs it for the data-source example: a miss evaluates the
// program and labels its objects; a hit finds the result kept for the same
// cached objects.
func BenchmarkEvaluateTrigger(b *testing.B) {
	gp, err := fixtures.Policy("zk-kafka-address")
	if err != nil {
		b.Fatal(err)
	}
	triggers, err := fixtures.Objects("zk-kafka-address", "triggers.yaml")
	if err != nil {
		b.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	e := New(Config{Kinds: restMapper{mapper}})
	r := e.Reader(Sync{})
	cp := &policy.Compiled{Policy: gp, Program: celenv.Compile(gp), Evaluations: policy.NewEvaluations()}
	if err := cp.Program.Err(); err != nil {
		b.Fatal(err)
	}
	var redObject *unstructured.Unstructured
	for _, t := range triggers {
		if t.GetLabels()["color"] == "red" {
			redObject = t
		}
	}
	if redObject == nil {
		b.Fatal("no red Namespace among the fixture's triggers")
	}
	red, err := cluster.Triggers.FromList(redObject.DeepCopy())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	for _, kept := range []bool{false, true} {
		b.Run(map[bool]string{false: "miss", true: "hit"}[kept], func(b *testing.B) {
			if kept {
				if _, _, _, err := e.Evaluate(ctx, cp, policy.Trigger{GVR: nsGVR, Object: red}, r, 0); err != nil {
					b.Fatal(err)
				}
				cp.Evaluations.EndRound()
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				t := policy.Trigger{GVR: nsGVR, Object: red}
				if !kept {
					// A new object each time: nothing kept matches. Making
					// it is not what is measured.
					b.StopTimer()
					u := redObject.DeepCopy()
					u.SetUID(types.UID(fmt.Sprint(i)))
					next, err := cluster.Triggers.FromList(u)
					if err != nil {
						b.Fatal(err)
					}
					t.Object = next
					i++
					b.StartTimer()
				}
				ev, _, hit, err := e.Evaluate(ctx, cp, t, r, 0)
				if err != nil || hit != kept || len(ev.Objects) != 1 {
					b.Fatalf("kept %v, objects %d, error %v: want kept %v, 1 object", hit, len(ev.Objects), err, kept)
				}
				if !kept {
					cp.Evaluations.EndRound() // a fresh round: the memo stays small
				}
			}
		})
	}
}
