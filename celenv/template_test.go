package celenv_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
)

// templateSpec is a policy on Namespace creation with one variable, team, and
// one template entry.
func templateSpec(value string, interpolate apiv1.Interpolation) apiv1.GeneratingPolicySpec {
	return apiv1.GeneratingPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{
						APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"},
					},
				},
			}},
		},
		Variables: []admissionregistrationv1.Variable{
			{Name: "team", Expression: "object.metadata.?labels.?team.orValue('none')"},
		},
		Generation: []apiv1.Generation{{Template: &apiv1.Template{Value: value, Interpolate: interpolate}}},
	}
}

// lines joins YAML lines, so templates keep their indentation in a table.
func lines(l ...string) string { return strings.Join(l, "\n") + "\n" }

// widget is a template of one object whose spec is given by the lines after.
func widget(spec ...string) string {
	return lines(append([]string{"apiVersion: example.com/v1", "kind: Widget", "metadata:", "  name: w"}, spec...)...)
}

// widgetWith is the object widget generates, with spec set to value.
func widgetWith(value any) map[string]any {
	return map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w"},
		"spec":       value,
	}
}

func configMap(namespace, name string) map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
	}
}

func TestTemplate(t *testing.T) {
	trigger := createNamespace(namespace("team-a", map[string]string{"team": "platform"}))
	tests := []struct {
		name        string
		value       string
		interpolate apiv1.Interpolation
		namespaced  bool // a NamespacedGeneratingPolicy in namespace "team"
		want        []map[string]any
		wantErr     []string // compile error containing each
		wantEvalErr []string // evaluation error containing each
	}{
		{
			name: "literal template",
			value: lines(
				"apiVersion: v1",
				"kind: ConfigMap",
				"metadata:",
				"  name: settings",
				"  namespace: elsewhere",
				"  labels:",
				"    app.kubernetes.io/name: settings",
				"data:",
				"  replicas: '3'",
				"  config.yaml: |",
				"    a: 1",
			),
			want: []map[string]any{{
				"apiVersion": "v1",
				"kind":       "ConfigMap",
				"metadata": map[string]any{
					"name": "settings", "namespace": "elsewhere",
					"labels": map[string]any{"app.kubernetes.io/name": "settings"},
				},
				"data": map[string]any{"replicas": "3", "config.yaml": "a: 1\n"},
			}},
		},
		{
			name: "multi-document, empty documents skipped",
			value: lines(
				"---",
				"apiVersion: v1",
				"kind: ConfigMap",
				"metadata: {name: one, namespace: x}",
				"---",
				"---",
				"# only a comment",
				"---",
				"apiVersion: v1",
				"kind: ConfigMap",
				"metadata: {name: two, namespace: (( object.metadata.name ))}",
			),
			interpolate: apiv1.InterpolateCEL,
			want:        []map[string]any{configMap("x", "one"), configMap("team-a", "two")},
		},
		{
			name:        "whole scalar int",
			value:       widget("spec: (( size(object.metadata.name) + 1 ))"),
			interpolate: apiv1.InterpolateCEL,
			want:        []map[string]any{widgetWith(int64(7))},
		},
		{
			name:        "whole scalar bool",
			value:       widget("spec: (( object.metadata.name.startsWith('team-') ))"),
			interpolate: apiv1.InterpolateCEL,
			want:        []map[string]any{widgetWith(true)},
		},
		{
			name:        "whole scalar map",
			value:       widget(`spec: '(( {"team": variables.team, "n": 1} ))'`),
			interpolate: apiv1.InterpolateCEL,
			want:        []map[string]any{widgetWith(map[string]any{"team": "platform", "n": int64(1)})},
		},
		{
			name:        "whole scalar list",
			value:       widget("spec:", "  - (( [object.metadata.name, 2.5, null] ))", "  - ((variables.team))"),
			interpolate: apiv1.InterpolateCEL,
			want:        []map[string]any{widgetWith([]any{[]any{"team-a", 2.5, nil}, "platform"})},
		},
		{
			name:        "whole scalar null",
			value:       widget("spec: (( null ))"),
			interpolate: apiv1.InterpolateCEL,
			want:        []map[string]any{widgetWith(nil)},
		},
		{
			name:        "whole scalar with nested parentheses and a quoted ))",
			value:       widget(`spec: (( string(size(object.metadata.name)) + "))" ))`),
			interpolate: apiv1.InterpolateCEL,
			want:        []map[string]any{widgetWith("6))")},
		},
		{
			name: "embedded strings",
			value: widget(
				"spec:",
				`  name: "app-(( object.metadata.name ))-cfg"`,
				"  scalars: n=(( 1 + 1 )), d=(( 2.5 )), u=(( 3u )), ok=(( true )), s=((variables.team))",
				"  file: |",
				"    team = (( variables.team ))",
				"    namespace = (( object.metadata.name ))",
			),
			interpolate: apiv1.InterpolateCEL,
			want: []map[string]any{widgetWith(map[string]any{
				"name":    "app-team-a-cfg",
				"scalars": "n=2, d=2.5, u=3, ok=true, s=platform",
				"file":    "team = platform\nnamespace = team-a\n",
			})},
		},
		{
			name:        "escape",
			value:       widget(`spec: \(( not a placeholder )) but (( 'this' )) is, \((also not`, `\((key: v`),
			interpolate: apiv1.InterpolateCEL,
			want: []map[string]any{{
				"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
				"spec":  "(( not a placeholder )) but this is, ((also not",
				"((key": "v",
			}},
		},
		{
			name:        "interpolate none leaves placeholders untouched",
			value:       widget(`spec: (( x )) and \(( y ))`, "(( k )): v"),
			interpolate: apiv1.InterpolateNone,
			want: []map[string]any{{
				"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
				"spec":    `(( x )) and \(( y ))`,
				"(( k ))": "v",
			}},
		},
		{
			name: "namespaced policy namespace override",
			value: lines(
				"apiVersion: v1",
				"kind: ConfigMap",
				"metadata:",
				"  name: (( object.metadata.name ))-settings",
				"---",
				"apiVersion: v1",
				"kind: ConfigMap",
				"metadata: {name: explicit, namespace: team}",
			),
			interpolate: apiv1.InterpolateCEL,
			namespaced:  true,
			want:        []map[string]any{configMap("team", "team-a-settings"), configMap("team", "explicit")},
		},
		{
			name:        "namespaced policy cannot write to another namespace",
			value:       lines("apiVersion: v1", "kind: ConfigMap", "metadata: {name: x, namespace: (( object.metadata.name ))}"),
			interpolate: apiv1.InterpolateCEL,
			namespaced:  true,
			wantEvalErr: []string{`spec.generate[0].template.value: document 0: ConfigMap team-a/x is outside namespace "team"`},
		},
		{
			name:        "placeholder in key",
			value:       widget("spec:", "  (( object.metadata.name )): x"),
			interpolate: apiv1.InterpolateCEL,
			wantErr:     []string{`spec.generate[0].template.value: document 0, spec[(( object.metadata.name ))]: Invalid value: "(( object.metadata.name ))": a mapping key cannot hold a placeholder`},
		},
		{
			name:        "unterminated placeholder",
			value:       widget("spec: a (( object.metadata.name ) b"),
			interpolate: apiv1.InterpolateCEL,
			wantErr:     []string{"spec.generate[0].template.value: document 0, spec: Invalid value:", "unterminated (("},
		},
		{
			name:        "invalid YAML",
			value:       widget("spec: [1, 2"),
			interpolate: apiv1.InterpolateCEL,
			wantErr:     []string{"spec.generate[0].template.value: document 0: Invalid value: yaml: line"},
		},
		{
			name:        "duplicate key",
			value:       widget("spec: 1", "spec: 2"),
			interpolate: apiv1.InterpolateNone,
			wantErr:     []string{"spec.generate[0].template.value: document 0: Invalid value:", `mapping key "spec" already defined`},
		},
		{
			name:        "CEL syntax error in a placeholder",
			value:       widget() + "---\n" + lines("apiVersion: v1", "kind: ConfigMap", "metadata: {name: x}", "data:", "  name: a-(( object.metadata.name + ))"),
			interpolate: apiv1.InterpolateCEL,
			wantErr:     []string{`spec.generate[0].template.value: document 1, data.name: Invalid value: "object.metadata.name +": `, "Syntax error"},
		},
		{
			name:        "empty placeholder",
			value:       widget("spec: (( ))"),
			interpolate: apiv1.InterpolateCEL,
			wantErr:     []string{"spec.generate[0].template.value: document 0, spec: Required value"},
		},
		{
			name:        "non-string value embedded in a string",
			value:       widget("spec: labels are (( object.metadata.labels ))"),
			interpolate: apiv1.InterpolateCEL,
			wantEvalErr: []string{"spec.generate[0].template.value: document 0, spec: (( object.metadata.labels )) is a map: only a string, number or bool can be spliced into text"},
		},
		{
			name:        "evaluation error carries the path",
			value:       widget("spec:", "  - (( object.metadata.missing ))"),
			interpolate: apiv1.InterpolateCEL,
			wantEvalErr: []string{"spec.generate[0].template.value: document 0, spec[0]: ", "missing"},
		},
		{
			name:    "infinity and NaN literals",
			value:   widget("spec: [.inf, -.Inf, .nan]"),
			wantErr: []string{`spec[0]: Invalid value: ".inf": JSON has no infinity or NaN`, `spec[1]: Invalid value: "-.Inf"`, `spec[2]: Invalid value: ".nan"`},
		},
		{
			name:        "infinity from a placeholder",
			value:       widget("spec: (( [1.0, double('Infinity')] ))"),
			interpolate: apiv1.InterpolateCEL,
			wantEvalErr: []string{"spec.generate[0].template.value: document 0, spec: [1]: +Inf: JSON has no infinity or NaN"},
		},
		{
			name:        "uint past int64 from a placeholder",
			value:       widget("spec: (( 18446744073709551615u ))"),
			interpolate: apiv1.InterpolateCEL,
			wantEvalErr: []string{"spec.generate[0].template.value: document 0, spec: 18446744073709551615u is out of range: an object holds integers up to 9223372036854775807"},
		},
		{
			name:        "object without a name after evaluation",
			value:       lines("apiVersion: v1", "kind: ConfigMap", "metadata: {name: (( '' ))}"),
			interpolate: apiv1.InterpolateCEL,
			wantEvalErr: []string{"spec.generate[0].template.value: document 0: an object needs apiVersion, kind and metadata.name"},
		},
		{
			name:    "literal object without a name",
			value:   lines("apiVersion: v1", "kind: ConfigMap"),
			wantErr: []string{"spec.generate[0].template.value: document 0: Invalid value: an object needs apiVersion, kind and metadata.name"},
		},
		{
			name:    "a document that is a list",
			value:   lines("- apiVersion: v1", "  kind: ConfigMap", "  metadata: {name: a}"),
			wantErr: []string{"spec.generate[0].template.value: document 0: Invalid value: a document must be one object, not a list"},
		},
		{
			name:    "a document that is a List object",
			value:   lines("apiVersion: v1", "kind: ConfigMapList", "items:", "- apiVersion: v1", "  kind: ConfigMap", "  metadata: {name: a}"),
			wantErr: []string{"spec.generate[0].template.value: document 0: Invalid value: a List is not allowed"},
		},
		{
			name:    "no documents",
			value:   "# nothing\n",
			wantErr: []string{"spec.generate[0].template.value: Required value"},
		},
		{
			name:        "unknown interpolation",
			value:       widget(),
			interpolate: "jinja",
			wantErr:     []string{`spec.generate[0].template.interpolate: Unsupported value: "jinja"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta := metav1.ObjectMeta{Name: "template"}
			var p apiv1.Policy = &apiv1.GeneratingPolicy{ObjectMeta: meta, Spec: templateSpec(tt.value, tt.interpolate)}
			if tt.namespaced {
				meta.Namespace = "team"
				p = &apiv1.NamespacedGeneratingPolicy{ObjectMeta: meta, Spec: templateSpec(tt.value, tt.interpolate)}
			}
			prog := celenv.Compile(p)
			if !errorContains(t, "compile", prog.Err(), tt.wantErr) {
				return
			}
			res, err := prog.Evaluate(context.Background(), trigger)
			if !errorContains(t, "evaluate", err, tt.wantEvalErr) {
				return
			}
			var got []map[string]any
			for _, g := range res.Objects {
				got = append(got, g.Object.Object)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("generated objects (-want +got):\n%s", diff)
			}
		})
	}
}

// errorContains checks err against the substrings want (none: no error) and
// reports whether the test should go on.
func errorContains(t *testing.T, step string, err error, want []string) bool {
	t.Helper()
	switch {
	case len(want) == 0 && err != nil:
		t.Fatalf("%s: want no error, got %v", step, err)
	case len(want) > 0 && err == nil:
		t.Fatalf("%s: want an error containing %q, got none", step, want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not contain %q", step, err, w)
		}
	}
	return err == nil
}

// TestTemplateObjectsAreFresh checks that a compiled template shares nothing
// between evaluations: changing one result does not change the next.
func TestTemplateObjectsAreFresh(t *testing.T) {
	spec := templateSpec(lines("apiVersion: v1", "kind: ConfigMap", "metadata: {name: a, namespace: b}", "data: {k: v}"), "")
	prog := celenv.Compile(&apiv1.GeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}, Spec: spec})
	trigger := createNamespace(namespace("team-a", nil))
	first, err := prog.Evaluate(context.Background(), trigger)
	if err != nil {
		t.Fatal(err)
	}
	first.Objects[0].Object.Object["data"].(map[string]any)["k"] = "changed"
	second, err := prog.Evaluate(context.Background(), trigger)
	if err != nil {
		t.Fatal(err)
	}
	if got := second.Objects[0].Object.Object["data"].(map[string]any)["k"]; got != "v" {
		t.Errorf("second evaluation: data.k = %v, want v", got)
	}
}

func TestEvaluateTemplateFixture(t *testing.T) {
	prog := celenv.Compile(loadPolicy(t, "template-configmap"))
	if err := prog.Err(); err != nil {
		t.Fatal(err)
	}
	var trigger, want map[string]any
	for file, into := range map[string]*map[string]any{"triggers.yaml": &trigger, "expected.yaml": &want} {
		data, err := os.ReadFile("../fixtures/template-configmap/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, into); err != nil {
			t.Fatal(err)
		}
	}
	// expected.yaml is render's output: celenv does not label, inventory does.
	unstructured.RemoveNestedField(want, "metadata", "labels")
	unstructured.RemoveNestedField(want, "metadata", "annotations")
	res, err := prog.Evaluate(context.Background(), createNamespace(trigger))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Matched || len(res.Objects) != 1 {
		t.Fatalf("want 1 object, got matched=%v objects=%d", res.Matched, len(res.Objects))
	}
	if diff := cmp.Diff(want, res.Objects[0].Object.Object); diff != "" {
		t.Errorf("generated ConfigMap (-want +got):\n%s", diff)
	}
}
