package inventory

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestCovers(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "ns", "uid": "u", "labels": map[string]any{"x": "1", "other": "2"}},
		"data":     map[string]any{"k": "v", "extra": "by someone else"},
		"spec":     map[string]any{"replicas": int64(2), "ports": []any{map[string]any{"port": int64(80), "protocol": "TCP"}}},
	}}
	tests := []struct {
		name    string
		desired map[string]any
		want    bool
	}{
		{"same fields", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "ns", "labels": map[string]any{"x": "1"}}, "data": map[string]any{"k": "v"}}, true},
		{"changed value", map[string]any{"data": map[string]any{"k": "w"}}, false},
		{"missing field", map[string]any{"data": map[string]any{"new": "v"}}, false},
		{"missing label", map[string]any{"metadata": map[string]any{"labels": map[string]any{"y": "1"}}}, false},
		{"int as float", map[string]any{"spec": map[string]any{"replicas": float64(2)}}, true},
		{"list element defaulted by the server", map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}}, true},
		{"list of another length", map[string]any{"spec": map[string]any{"ports": []any{}}}, false},
		{"type changed", map[string]any{"data": "text"}, false},
		{"null asks for absence", map[string]any{"data": map[string]any{"gone": nil}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := covers(live, &unstructured.Unstructured{Object: tt.desired}); got != tt.want {
				t.Fatalf("covers = %v, want %v", got, tt.want)
			}
		})
	}
}
