package celenv_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/fixtures"
)

// BenchmarkCompile measures compiling the data-source example policy: the
// work done once per policy generation.
func BenchmarkCompile(b *testing.B) {
	policy, err := fixtures.Policy("zk-kafka-address")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := celenv.Compile(policy).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvaluate measures evaluating compiled policies against one
// trigger: the work done per trigger on every sync. Nothing is compiled here.
func BenchmarkEvaluate(b *testing.B) {
	for _, scenario := range []string{"zk-kafka-address", "clone-list", "foreach-clone-list"} {
		b.Run(scenario, func(b *testing.B) {
			policy, err := fixtures.Policy(scenario)
			if err != nil {
				b.Fatal(err)
			}
			triggers, err := fixtures.Objects(scenario, "triggers.yaml")
			if err != nil {
				b.Fatal(err)
			}
			var contextObjs []*unstructured.Unstructured
			if _, err := fixtures.Read(scenario, "context.yaml"); err == nil {
				if contextObjs, err = fixtures.Objects(scenario, "context.yaml"); err != nil {
					b.Fatal(err)
				}
			}
			prog := celenv.Compile(policy)
			if err := prog.Err(); err != nil {
				b.Fatal(err)
			}
			in := celenv.Input{
				Object:  triggers[0].Object,
				Request: celenv.Request{Operation: "CREATE", Name: triggers[0].GetName(), Namespace: triggers[0].GetNamespace()},
				Scopes:  celenv.BuiltinScopes{},
				Reader:  celenv.NewObjectReader(contextObjs),
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res, err := prog.Evaluate(ctx, in)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Objects) == 0 {
					b.Fatal("nothing generated")
				}
			}
		})
	}
}
