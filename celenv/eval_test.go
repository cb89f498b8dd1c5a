package celenv_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/celenv/internal/celtest"
)

func loadPolicy(t *testing.T, scenario string) apiv1.Policy {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "fixtures", scenario, "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policies, err := apiv1.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) != 1 {
		t.Fatalf("want 1 policy in %s, got %d", scenario, len(policies))
	}
	return policies[0]
}

func namespace(name string, labels map[string]string) map[string]any {
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(name)
	ns.SetLabels(labels)
	return ns.Object
}

func createNamespace(obj map[string]any) celenv.Input {
	u := unstructured.Unstructured{Object: obj}
	return celenv.Input{
		Object: obj,
		Request: celenv.Request{
			Operation: "CREATE",
			Name:      u.GetName(),
			Kind:      schema.GroupVersionKind{Version: "v1", Kind: "Namespace"},
			Resource:  schema.GroupVersionResource{Version: "v1", Resource: "namespaces"},
		},
	}
}

func TestEvaluateDataSource(t *testing.T) {
	prog := celenv.Compile(loadPolicy(t, "zk-kafka-address"))
	if err := prog.Err(); err != nil {
		t.Fatal(err)
	}
	expected, err := os.ReadFile("../fixtures/zk-kafka-address/expected.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(expected, &want); err != nil {
		t.Fatal(err)
	}
	// expected.yaml is render's output: celenv does not label or annotate, inventory does.
	unstructured.RemoveNestedField(want, "metadata", "labels")
	unstructured.RemoveNestedField(want, "metadata", "annotations")

	red, err := prog.Evaluate(context.Background(), createNamespace(namespace("team-red", map[string]string{"color": "red"})))
	if err != nil {
		t.Fatal(err)
	}
	if !red.Matched || len(red.Objects) != 1 {
		t.Fatalf("red namespace: want 1 object, got matched=%v objects=%d", red.Matched, len(red.Objects))
	}
	if diff := cmp.Diff(want, red.Objects[0].Object.Object); diff != "" {
		t.Errorf("generated ConfigMap (-want +got):\n%s", diff)
	}

	for _, labels := range []map[string]string{{"color": "blue"}, nil} {
		other, err := prog.Evaluate(context.Background(), createNamespace(namespace("other", labels)))
		if err != nil {
			t.Fatal(err)
		}
		if other.Matched || len(other.Objects) != 0 {
			t.Errorf("labels %v: want no match and no objects, got matched=%v objects=%d", labels, other.Matched, len(other.Objects))
		}
	}
}

func TestCompileErrorsNameFieldPath(t *testing.T) {
	prog := celenv.Compile(loadPolicy(t, "broken-variable"))
	err := prog.Err()
	if err == nil {
		t.Fatal("want a compile error")
	}
	for _, want := range []string{"GeneratingPolicy/broken-variable", "spec.variables[1].expression", "Syntax error"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if _, err := prog.Evaluate(context.Background(), createNamespace(namespace("x", nil))); err == nil {
		t.Error("Evaluate on a broken program must fail")
	}
}

func TestCompileChecks(t *testing.T) {
	base := loadPolicy(t, "zk-kafka-address").(*apiv1.GeneratingPolicy)
	tests := []struct {
		name       string
		namespaced bool
		edit       func(*apiv1.GeneratingPolicySpec)
		wantErr    string // empty: compiles
	}{
		{name: "valid", edit: func(*apiv1.GeneratingPolicySpec) {}},
		{
			name:    "generate must return bool",
			edit:    func(s *apiv1.GeneratingPolicySpec) { s.Generation[0].Expression = "'text'" },
			wantErr: "spec.generate[0].expression: Invalid value: must evaluate to bool or a list of bools, not string",
		},
		{
			name:    "matchCondition must return bool",
			edit:    func(s *apiv1.GeneratingPolicySpec) { s.MatchConditions[0].Expression = "1" },
			wantErr: "spec.matchConditions[0].expression",
		},
		{
			name:    "no resource rules",
			edit:    func(s *apiv1.GeneratingPolicySpec) { s.MatchConstraints = nil },
			wantErr: "spec.matchConstraints.resourceRules: Required value",
		},
		{
			name:    "duplicate variable",
			edit:    func(s *apiv1.GeneratingPolicySpec) { s.Variables[1].Name = "nsName" },
			wantErr: `spec.variables[1].name: Duplicate value: "nsName"`,
		},
		{
			// As in Kyverno: whether the namespace is its own is known
			// only when the expression runs.
			name:       "namespaced policy may name a namespace",
			namespaced: true,
			edit:       func(*apiv1.GeneratingPolicySpec) {},
		},
		{
			name:       "namespaced policy applies a list",
			namespaced: true,
			edit: func(s *apiv1.GeneratingPolicySpec) {
				s.Generation[0].Expression = "generator.Apply(variables.configmap)"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := base.Spec.DeepCopy()
			tt.edit(spec)
			var p apiv1.Policy = &apiv1.GeneratingPolicy{ObjectMeta: base.ObjectMeta, Spec: *spec}
			if tt.namespaced {
				p = &apiv1.NamespacedGeneratingPolicy{ObjectMeta: base.ObjectMeta, Spec: *spec}
				p.SetNamespace("team")
			}
			err := celenv.Compile(p).Err()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("want no error, got %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("want error containing %q, got %v", tt.wantErr, err)
			}
		})
	}
}

// TestReproducible: a result may be kept only when it depends on the input
// alone; reading another object or the clock makes it not.
func TestReproducible(t *testing.T) {
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "base", "namespace": "team"}, "data": map[string]any{"k": "v"}}
	reader := celenv.NewObjectReader([]*unstructured.Unstructured{{Object: cm}})
	tests := []struct {
		name string
		expr string
		want bool
	}{
		{"the trigger alone", `object.metadata.name`, true},
		{"a conditional that reads nothing else", `object.metadata.name == "x" ? string(time.now()) : "y"`, true},
		{"the clock", `string(time.now())`, false},
		{"an object read", `resource.Get("v1", "configmaps", "team", "base").data.k`, false},
		{"a list", `string(size(resource.List("v1", "configmaps", "team").items))`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prog := celenv.Compile(celtest.ExprPolicy(tt.expr))
			if err := prog.Err(); err != nil {
				t.Fatal(err)
			}
			in := createNamespace(namespace("team", nil))
			in.Reader, in.Scopes = reader, celenv.BuiltinScopes{}
			res, err := prog.Evaluate(context.Background(), in)
			if err != nil || !res.Matched {
				t.Fatalf("matched %v, error %v", res.Matched, err)
			}
			if res.Reproducible != tt.want {
				t.Errorf("Reproducible = %v, want %v", res.Reproducible, tt.want)
			}
		})
	}
}

// TestMatchConditionsFollowAdmission: as in admission, a false condition
// skips the trigger even when another fails, and a failure is the trigger's
// error only when no condition is false.
func TestMatchConditionsFollowAdmission(t *testing.T) {
	failing := admissionregistrationv1.MatchCondition{Name: "reads-a-missing-label", Expression: "object.metadata.labels.team == 'a'"}
	falseOne := admissionregistrationv1.MatchCondition{Name: "never", Expression: "false"}
	trueOne := admissionregistrationv1.MatchCondition{Name: "always", Expression: "true"}
	for _, tc := range []struct {
		name       string
		conditions []admissionregistrationv1.MatchCondition
		wantErr    string
	}{
		{name: "error before false", conditions: []admissionregistrationv1.MatchCondition{failing, falseOne}},
		{name: "false before error", conditions: []admissionregistrationv1.MatchCondition{falseOne, failing}},
		{name: "error and true", conditions: []admissionregistrationv1.MatchCondition{failing, trueOne}, wantErr: "spec.matchConditions[0].expression"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := loadPolicy(t, "zk-kafka-address")
			spec := p.PolicySpec()
			spec.MatchConditions = tc.conditions
			prog := celenv.Compile(p)
			if err := prog.Err(); err != nil {
				t.Fatal(err)
			}
			res, err := prog.Evaluate(context.Background(), createNamespace(namespace("unlabelled", map[string]string{"color": "red"})))
			if tc.wantErr == "" {
				if err != nil || res.Matched {
					t.Fatalf("want the trigger skipped without error, got matched=%v err=%v", res.Matched, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || res.Matched {
				t.Fatalf("want an error naming %s, got matched=%v err=%v", tc.wantErr, res.Matched, err)
			}
		})
	}
}

// TestRequestReadsAsAdmissionGivesIt: the request variable, made only when
// an expression first reads it, holds the trigger's operation, name, kind
// and resource wherever it is read, first and again: in a matchCondition,
// in variables and in a generate expression.
func TestRequestReadsAsAdmissionGivesIt(t *testing.T) {
	p := celtest.ExprPolicy(
		`request.kind.kind + "/" + request.resource.resource`,
		`variables.v0 + " " + request.operation + " " + request.name + " " + string(size(request.userInfo)) + " [" + request.namespace + "]"`,
	)
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "created", Expression: `request.operation == "CREATE"`}}
	prog := celenv.Compile(p)
	if err := prog.Err(); err != nil {
		t.Fatal(err)
	}
	in := createNamespace(namespace("team", nil))
	in.Scopes = celenv.BuiltinScopes{}
	res, err := prog.Evaluate(context.Background(), in)
	if err != nil || !res.Matched || len(res.Objects) != 1 {
		t.Fatalf("matched %v, %d objects, error %v", res.Matched, len(res.Objects), err)
	}
	got, _, _ := unstructured.NestedString(res.Objects[0].Object.Object, "data", "value")
	if want := "Namespace/namespaces CREATE team 0 []"; got != want {
		t.Errorf("data.value = %q, want %q", got, want)
	}
	in.Request.Operation = "UPDATE"
	if res, err := prog.Evaluate(context.Background(), in); err != nil || res.Matched {
		t.Errorf("an update: matched %v, error %v; want skipped by request.operation", res.Matched, err)
	}
}
