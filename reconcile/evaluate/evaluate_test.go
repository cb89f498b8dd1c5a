package evaluate

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/sources"
)

// zkPolicy is the data-source example compiled, and its red Namespace.
func zkPolicy(t testing.TB) (*policy.Compiled, *cluster.Object) {
	t.Helper()
	gp, err := fixtures.Policy("zk-kafka-address")
	if err != nil {
		t.Fatal(err)
	}
	cp := &policy.Compiled{Policy: gp, Program: celenv.Compile(gp), Evaluations: policy.NewEvaluations()}
	if err := cp.Program.Err(); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Namespace")
	u.SetName("red")
	u.SetUID("uid-red")
	u.SetLabels(map[string]string{"color": "red"})
	red, err := cluster.Triggers.FromList(u)
	if err != nil {
		t.Fatal(err)
	}
	return cp, red
}

func configMapMapper() Mapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	return restMapper{m}
}

var namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// TestEvaluationIsKeptUntilItsExceptionsChange: an evaluation labels what
// it generates with its origin and is kept for the same inputs; a new set
// of exceptions for the policy evaluates it again, under them.
func TestEvaluationIsKeptUntilItsExceptionsChange(t *testing.T) {
	cp, red := zkPolicy(t)
	e := New(Config{Kinds: configMapMapper(), Exceptions: true})
	var kept PolicyExceptions
	r := e.Reader(Sync{Exceptions: &kept})
	ctx := context.Background()
	tr := policy.Trigger{GVR: namespaces, Object: red}

	ev, m, hit, err := e.Evaluate(ctx, cp, tr, r, 0)
	if err != nil || hit || m == nil || len(ev.Objects) != 1 || ev.Op != admission.Create {
		t.Fatalf("kept %v, objects %d, op %s, error %v: want a CREATE evaluated, 1 object", hit, len(ev.Objects), ev.Op, err)
	}
	if got := ev.Objects[0].GetLabels()[sproutv1alpha1.LabelPolicyName]; got != "zk-kafka-address" {
		t.Errorf("policy-name label %q", got)
	}
	cp.Evaluations.EndRound()
	if _, _, hit, _ := e.Evaluate(ctx, cp, tr, r, 0); !hit {
		t.Error("the same inputs: evaluated again")
	}

	x := exception(t, "ns", "all", nil, "zk-kafka-address")
	if named := e.TakeExceptions("git", []sources.Exception{x}); !named(policy.KeyOf(cp.Policy)) {
		t.Fatal("policy not named")
	}
	kept.Forget()
	ev, _, hit, err = e.Evaluate(ctx, cp, tr, r, 0)
	if err != nil || hit || len(ev.Excepted) != 1 {
		t.Errorf("under the exception: kept %v, excepted %v, error %v", hit, ev.Excepted, err)
	}
}

// TestEvaluationReplaysTheLastUpdate: a program that reads oldObject is
// given the state before the trigger's last UPDATE; one that does not, a
// CREATE; a tombstone is a DELETE.
func TestEvaluationReplaysTheLastUpdate(t *testing.T) {
	cp, red := zkPolicy(t)
	before := red
	e := New(Config{Kinds: configMapMapper(), LastUpdate: func(*policy.Compiled, schema.GroupVersionResource, types.UID) *cluster.Object { return before }})
	if op, old := e.replayed(cp, policy.Trigger{GVR: namespaces, Object: red}); op != admission.Create || old != nil {
		t.Errorf("a program that reads no event: %s %v", op, old)
	}
	if op, _ := e.replayed(cp, policy.Trigger{GVR: namespaces, Object: red, Deleted: true}); op != admission.Delete {
		t.Errorf("a tombstone: %s", op)
	}
	gp := cp.Policy.(*apiv1.GeneratingPolicy).DeepCopy()
	gp.Spec.Variables = append(gp.Spec.Variables, admissionregistrationv1.Variable{Name: "old", Expression: "oldObject"})
	reads := &policy.Compiled{Policy: gp, Program: celenv.Compile(gp), Evaluations: policy.NewEvaluations()}
	if err := reads.Program.Err(); err != nil || !reads.Program.ReadsEvent() {
		t.Fatalf("reads the event %v, error %v", reads.Program.ReadsEvent(), err)
	}
	ev, _, _, err := e.Evaluate(context.Background(), reads, policy.Trigger{GVR: namespaces, Object: red}, e.Reader(Sync{}), 0)
	if err != nil || ev.Op != admission.Update || ev.Old != before {
		t.Errorf("op %s, old %v, error %v; want an UPDATE from the state before", ev.Op, ev.Old, err)
	}
}
