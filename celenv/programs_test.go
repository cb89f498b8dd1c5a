package celenv

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/fixtures"
)

// policyFrom decodes one policy from src.
func policyFrom(t *testing.T, src string) apiv1.Policy {
	t.Helper()
	ps, err := apiv1.Decode([]byte(src))
	if err != nil || len(ps) != 1 {
		t.Fatalf("decode: %v, %d policies", err, len(ps))
	}
	return ps[0]
}

// TestIdenticalExpressionsShareAProgram: two policies from one template
// share the programs of the expressions they have in common, and only
// those; the same source in the other environment is another program.
func TestIdenticalExpressionsShareAProgram(t *testing.T) {
	raw, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := Compile(policyFrom(t, string(raw)))
	b := Compile(policyFrom(t, strings.ReplaceAll(strings.ReplaceAll(string(raw),
		"name: zk-kafka-address", "name: another"), `"name": "zk-kafka-address"`, `"name": "another"`)))
	namespaced := Compile(policyFrom(t, strings.ReplaceAll(strings.ReplaceAll(string(raw),
		"kind: GeneratingPolicy", "kind: NamespacedGeneratingPolicy"), "name: zk-kafka-address", "name: zk\n  namespace: team")))
	for _, p := range []*Program{a, b, namespaced} {
		if p.Err() != nil {
			t.Fatal(p.Err())
		}
	}
	if a.matchConditions[0].program != b.matchConditions[0].program || a.variables[0].program != b.variables[0].program {
		t.Error("the same expressions in two policies are two programs")
	}
	if a.variables[1].program == b.variables[1].program {
		t.Error("two different expressions share a program")
	}
	if a.matchConditions[0].program == namespaced.matchConditions[0].program {
		t.Error("a cluster and a namespaced policy share a program: their environments differ")
	}
	// Each still evaluates as its own policy: the variable that differs.
	triggers, err := fixtures.Objects("zk-kafka-address", "triggers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	red := triggers[0] // team-red
	in := Input{Object: red.Object, Request: Request{Operation: "CREATE", Name: red.GetName()}, Scopes: BuiltinScopes{}}
	for p, want := range map[*Program]string{a: "zk-kafka-address", b: "another"} {
		res, err := p.Evaluate(context.Background(), in)
		if err != nil || len(res.Objects) != 1 || res.Objects[0].Object.GetName() != want {
			t.Errorf("%s generated %v, %v; want a ConfigMap %s", p.Policy(), res.Objects, err, want)
		}
	}
}

// TestAProgramGoesWithItsLastExpression: the table does not keep a program
// that no compiled policy uses.
func TestAProgramGoesWithItsLastExpression(t *testing.T) {
	const src = `object.metadata.name == "a-program-that-goes"`
	p := Compile(policyFrom(t, `apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata: {name: goes}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [namespaces]}]
  matchConditions: [{name: once, expression: '`+src+`'}]
  generate: [{expression: "true"}]
`))
	if p.Err() != nil {
		t.Fatal(p.Err())
	}
	key := programKey{env: clusterEnv, src: src}
	if held(key) == nil {
		t.Fatal("the program is not in the table")
	}
	p = nil
	for deadline := time.Now().Add(30 * time.Second); ; runtime.Gosched() {
		runtime.GC()
		programs.Lock()
		_, in := programs.m[key]
		programs.Unlock()
		if !in {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the table keeps a program no policy uses")
		}
	}
	runtime.KeepAlive(p)
}

// held returns the table's program of key, nil when there is none.
func held(key programKey) *sharedProgram {
	programs.Lock()
	defer programs.Unlock()
	return programs.m[key].Value()
}
