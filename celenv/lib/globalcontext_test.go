package lib_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/celenv/internal/celtest"
)

// entries is a GlobalContext of fixed data: a pure stand-in for the store,
// keyed by entry then projection ("" for the whole data).
type entries map[string]map[string]any

func (e entries) Get(_ context.Context, name, projection string) (any, bool, error) {
	data, ok := e[name]
	if !ok {
		return nil, false, nil
	}
	if err, ok := data[projection].(error); ok {
		return nil, true, err
	}
	v, ok := data[projection]
	if !ok {
		return nil, true, errors.New("projection " + projection + " not found")
	}
	return v, true, nil
}

func TestGlobalContextGet(t *testing.T) {
	gctx := entries{
		"teams":  {"": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}, "names": []any{"a", "b"}},
		"broken": {"": errors.New("the host is not allowed")},
	}
	tests := []struct {
		name, expr string
		want       any
		wantErr    []string
	}{
		{name: "whole data", expr: `globalContext.Get("teams", "")[1].name`, want: "b"},
		{name: "one argument", expr: `globalContext.get("teams").size() == 2 ? "two" : "other"`, want: "two"},
		{name: "projection", expr: `globalContext.Get("teams", "names").join(",")`, want: "a,b"},
		{name: "missing entry is null", expr: `globalContext.Get("nope", "") == null ? "null" : "set"`, want: "null"},
		{name: "missing projection", expr: `globalContext.Get("teams", "nope")`, wantErr: []string{`globalContext.Get("teams", "nope")`, "projection nope not found"}},
		{name: "failed entry", expr: `globalContext.Get("broken", "")`, wantErr: []string{`globalContext.Get("broken")`, "not allowed", "spec.variables[0].expression"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prog := celenv.Compile(celtest.ExprPolicy(tt.expr))
			if err := prog.Err(); err != nil {
				t.Fatal(err)
			}
			res, err := prog.Evaluate(context.Background(), celenv.Input{
				Object:        map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team"}},
				GlobalContext: gctx,
			})
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("want an error, got %v", res.Objects)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Reproducible {
				t.Error("a result that read the global context is marked reproducible")
			}
			got := res.Objects[0].Object.Object["data"].(map[string]any)["value"]
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestGlobalContextRefusedInNamespacedPolicies(t *testing.T) {
	spec := celtest.ExprPolicy(`globalContext.Get("teams", "")`).Spec
	p := &apiv1.NamespacedGeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team"}, Spec: spec}
	err := celenv.Compile(p).Err()
	if err == nil || !strings.Contains(err.Error(), "globalContext is not allowed in namespaced policies") ||
		!strings.Contains(err.Error(), "spec.variables[0].expression") {
		t.Fatalf("want the namespaced refusal at its field, got %v", err)
	}
}
