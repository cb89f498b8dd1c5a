package offline

import (
	"fmt"
	"os"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sprout-gitops/sprout/internal/manifest"
)

// errorDetail is the failure an evaluation error is, unless the result
// expects one.
func errorDetail(r kyvernoResult, err error) string {
	want := strings.ToLower(r.Result + r.Status)
	if want == "fail" || want == "error" {
		return ""
	}
	return err.Error()
}

// compareGenerated compares the objects generated for a trigger with those
// of a generatedResource file.
func compareGenerated(path string, got []*unstructured.Unstructured) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	want, err := manifest.Parse(data)
	if err != nil {
		return fmt.Sprintf("%s: %v", path, err)
	}
	return compareObjects(want, got, true)
}

// compareObjects says how got differs from want, object by object; with
// ignoreBookkeeping, the labels and annotations that record the policy and
// trigger are left out of both, as kyverno test leaves out its own, and
// got's annotations are compared only where want has some.
func compareObjects(want, got []*unstructured.Unstructured, ignoreBookkeeping bool) string {
	index := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			o = o.DeepCopy()
			if ignoreBookkeeping {
				dropBookkeeping(o)
				// As kyverno test compares: an empty map or list, or a
				// null, is as good as none.
				m, _ := tidy(o.Object).(map[string]any)
				o.Object = m
			}
			m[testObjectID(o)] = o
		}
		return m
	}
	w, g := index(want), index(got)
	var diffs []string
	for _, id := range sortedIDs(w) {
		o, ok := g[id]
		if !ok {
			diffs = append(diffs, "missing: "+id)
			continue
		}
		if ignoreBookkeeping && len(w[id].GetAnnotations()) == 0 {
			// kyverno test drops every annotation of what it generates, so
			// a file written for it holds none: then none are compared.
			o = o.DeepCopy()
			unstructured.RemoveNestedField(o.Object, "metadata", "annotations")
		}
		if !equality.Semantic.DeepEqual(w[id].Object, o.Object) {
			diffs = append(diffs, id+" differs:\n"+yamlDiff(w[id], o))
		}
	}
	for _, id := range sortedIDs(g) {
		if _, ok := w[id]; !ok {
			diffs = append(diffs, "not expected: "+id)
		}
	}
	return strings.Join(diffs, "\n")
}

// tidy returns v without its empty maps, empty lists and nulls, at any
// depth; nil when nothing is left.
func tidy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if e = tidy(e); e != nil {
				out[k] = e
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		var out []any
		for _, e := range x {
			if e = tidy(e); e != nil {
				out = append(out, e)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return v
}

// dropBookkeeping removes the labels and annotations Sprout and Kyverno set
// to record where an object came from.
func dropBookkeeping(o *unstructured.Unstructured) {
	strip := func(m map[string]string) map[string]string {
		for k, v := range m {
			if strings.HasPrefix(k, "generate.kyverno.io/") || strings.HasPrefix(k, "sprout.dev/") ||
				(k == "app.kubernetes.io/managed-by" && (v == "sprout" || v == "kyverno")) {
				delete(m, k)
			}
		}
		return m
	}
	if l := strip(o.GetLabels()); len(l) > 0 {
		o.SetLabels(l)
	} else {
		unstructured.RemoveNestedField(o.Object, "metadata", "labels")
	}
	if a := strip(o.GetAnnotations()); len(a) > 0 {
		o.SetAnnotations(a)
	} else {
		unstructured.RemoveNestedField(o.Object, "metadata", "annotations")
	}
}

// yamlDiff is a unified diff of two objects as YAML.
func yamlDiff(want, got *unstructured.Unstructured) string {
	a, _ := yaml.Marshal(want.Object)
	b, _ := yaml.Marshal(got.Object)
	text, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)), FromFile: "want", ToFile: "got", Context: 3,
	})
	return text
}
