package celenv

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	yaml "go.yaml.in/yaml/v3"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// FuzzTemplate feeds the template scanner and compiler arbitrary text: text
// is one string scalar, value a whole template. Nothing may panic, and:
//   - splitPlaceholders is deterministic; it fails only at an unterminated
//     (( whose offset it names; text without (( is kept whole; and writing the
//     segments back as text (escaping (( as \(( ) and (( expr )) scans to the
//     same segments.
//   - Compiling fails only with errors whose field path is inside
//     spec.generate[0].template, and evaluating only with errors naming the
//     document; what evaluates is JSON, as every generated object must be.
//   - text as a string in a template evaluates to its text segments, in order,
//     with the placeholders' values between them.
//   - A template with no (( at all builds the same objects whether it is
//     interpolated or not.
func FuzzTemplate(f *testing.F) {
	for _, seed := range [][2]string{
		{"app-(( object.metadata.name ))-cfg", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: (( object.metadata.name ))}\n"},
		{`(( string(size(x)) + "))" ))`, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: '(( {\"n\": 1} ))'\n"},
		{`\(( not a placeholder )) but (( 'this' )) is, \((also not`, "---\n---\n# comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"},
		{"a (( object.metadata.name ) b", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n(( k )): v\n"},
		{"(( r'\\' )) (( '''))''' )) (( \"\\\"))\" ))", "- apiVersion: v1\n  kind: ConfigMap\n"},
		{"(( [1, {'a': (2)}][1].a ))", "apiVersion: v1\nkind: ConfigMapList\nitems: []\n"},
		{"((", "base: &b {apiVersion: v1, kind: ConfigMap}\n<<: *b\nmetadata: {name: m}\n"},
		{"", "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"},
	} {
		f.Add(seed[0], seed[1])
	}
	cluster, _, err := environments()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text, value string) {
		checkScan(t, text)
		checkTemplate(t, cluster, value)
		checkScalar(t, text)
	})
}

var unterminated = regexp.MustCompile(`^unterminated \(\( at offset (\d+): no matching \)\)$`)

// checkScan checks splitPlaceholders on s.
func checkScan(t *testing.T, s string) {
	t.Helper()
	segments, err := splitPlaceholders(s)
	again, errAgain := splitPlaceholders(s)
	if !reflect.DeepEqual(segments, again) || (err == nil) != (errAgain == nil) {
		t.Fatalf("splitPlaceholders(%q) is not deterministic: %v, %v then %v, %v", s, segments, err, again, errAgain)
	}
	if err != nil {
		m := unterminated.FindStringSubmatch(err.Error())
		if m == nil {
			t.Fatalf("splitPlaceholders(%q): error %q names no offset", s, err)
		}
		if at, _ := strconv.Atoi(m[1]); !strings.HasPrefix(s[at:], "((") {
			t.Fatalf("splitPlaceholders(%q): error %q points at %q, not at a ((", s, err, s[at:])
		}
		return
	}
	if !strings.Contains(s, "((") {
		want := []rawSegment{{text: s}}
		if s == "" {
			want = nil
		}
		if !reflect.DeepEqual(segments, want) {
			t.Fatalf("splitPlaceholders(%q) = %v: text without (( must be kept whole", s, segments)
		}
	}
	for i, seg := range segments {
		switch {
		case seg.isExpr && seg.text != strings.TrimSpace(seg.text):
			t.Fatalf("splitPlaceholders(%q): expression %q is not trimmed", s, seg.text)
		case !seg.isExpr && seg.text == "":
			t.Fatalf("splitPlaceholders(%q): an empty text segment", s)
		case !seg.isExpr && i > 0 && !segments[i-1].isExpr:
			t.Fatalf("splitPlaceholders(%q): two text segments in a row", s)
		}
	}
	written := writeSegments(segments)
	if back, err := splitPlaceholders(written); err != nil || !reflect.DeepEqual(back, segments) {
		t.Fatalf("splitPlaceholders(%q) = %v, written back as %q scans to %v, %v", s, segments, written, back, err)
	}
}

// writeSegments writes segments back as template text.
func writeSegments(segments []rawSegment) string {
	var b strings.Builder
	for _, seg := range segments {
		if seg.isExpr {
			b.WriteString("(( " + seg.text + " ))")
			continue
		}
		b.WriteString(strings.ReplaceAll(seg.text, "((", `\((`))
	}
	return b.String()
}

// checkTemplate compiles value as a template, interpolated and not, and
// evaluates what compiles.
func checkTemplate(t *testing.T, env *cel.Env, value string) {
	t.Helper()
	var results [2]any
	for i, interpolate := range []apiv1.Interpolation{apiv1.InterpolateNone, apiv1.InterpolateCEL} {
		path := field.NewPath("spec", "generate").Index(0).Child("template")
		_, errs := compileTemplate(env, &budget{}, &apiv1.Template{Value: value, Interpolate: interpolate}, path, nil)
		for _, err := range errs {
			if !strings.HasPrefix(err.Field, "spec.generate[0].template.value") {
				t.Fatalf("template %q (%s): error %q is not inside spec.generate[0].template.value", value, interpolate, err)
			}
		}
		if len(errs) > 0 {
			results[i] = "compile error"
			continue
		}
		objects, err := evaluateTemplate(t, value, interpolate)
		if err != nil {
			if !strings.Contains(err.Error(), "spec.generate[0].template.value: document ") {
				t.Fatalf("template %q (%s): evaluation error %q names no document", value, interpolate, err)
			}
			results[i] = "evaluation error"
			continue
		}
		results[i] = objects
	}
	if !strings.Contains(value, "((") && !reflect.DeepEqual(results[0], results[1]) {
		t.Fatalf("template %q has no placeholder, yet builds %v interpolated and %v not", value, results[1], results[0])
	}
}

// checkScalar evaluates text as the one string of a ConfigMap template.
func checkScalar(t *testing.T, text string) {
	t.Helper()
	// Invalid UTF-8 would be written as !!binary, which is never interpolated.
	text = strings.ToValidUTF8(text, "\uFFFD")
	doc, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "fuzz"},
		"data": map[string]any{"k": text},
	})
	if err != nil {
		t.Fatal(err)
	}
	segments, scanErr := splitPlaceholders(text)
	objects, err := evaluateTemplate(t, string(doc), apiv1.InterpolateCEL)
	switch {
	case scanErr != nil && (err == nil || !strings.Contains(err.Error(), "spec.generate[0].template.value: document 0, data.k: Invalid value")):
		t.Fatalf("text %q does not scan (%v), yet the template gives %v", text, scanErr, err)
	case err != nil:
		if !strings.Contains(err.Error(), "spec.generate[0].template.value: document 0, data.k") {
			t.Fatalf("text %q: error %q does not name data.k", text, err)
		}
		return
	}
	got := objects[0]["data"].(map[string]any)["k"]
	if len(segments) == 0 {
		if got != "" {
			t.Fatalf("text %q evaluates to %v", text, got)
		}
		return
	}
	if len(segments) == 1 && segments[0].isExpr {
		return // the placeholder's value, whatever its type
	}
	s, ok := got.(string)
	if !ok {
		t.Fatalf("text %q evaluates to %T %v, not a string", text, got, got)
	}
	// Text segments come out as written, in order, the placeholders' values
	// between them.
	rest, exprs := s, false
	for _, seg := range segments {
		if seg.isExpr {
			exprs = true
			continue
		}
		i := strings.Index(rest, seg.text)
		if i < 0 {
			t.Fatalf("text %q evaluates to %q, which lacks the text %q in its place", text, s, seg.text)
		}
		rest = rest[i+len(seg.text):]
	}
	switch first, last := segments[0], segments[len(segments)-1]; {
	case !exprs && s != first.text:
		t.Fatalf("text %q evaluates to %q, not to its text %q", text, s, first.text)
	case !first.isExpr && !strings.HasPrefix(s, first.text):
		t.Fatalf("text %q evaluates to %q, which does not start with %q", text, s, first.text)
	case !last.isExpr && !strings.HasSuffix(s, last.text):
		t.Fatalf("text %q evaluates to %q, which does not end with %q", text, s, last.text)
	}
}

// evaluateTemplate compiles a policy with the one template entry value and
// evaluates it for the creation of Namespace team-a.
func evaluateTemplate(t *testing.T, value string, interpolate apiv1.Interpolation) ([]map[string]any, error) {
	t.Helper()
	prog := Compile(&apiv1.GeneratingPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "fuzz"},
		Spec: apiv1.GeneratingPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"}},
					},
				}},
			},
			Generation: []apiv1.Generation{{Template: &apiv1.Template{Value: value, Interpolate: interpolate}}},
		},
	})
	if err := prog.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	trigger := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team-a"}}
	res, err := prog.Evaluate(ctx, Input{
		Object:  trigger,
		Request: Request{Operation: "CREATE", Name: "team-a"},
	})
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, g := range res.Objects {
		out = append(out, g.Object.Object)
	}
	if _, err := json.Marshal(out); err != nil {
		t.Fatalf("template %q (%s) generates what is not JSON: %v", value, interpolate, err)
	}
	return out, nil
}
