package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/internal/yamlbudget"
)

// kyvernoTest is the part of Kyverno's Test (cli.kyverno.io/v1alpha1) that
// concerns generating policies. Fields for other kinds of policy are
// ignored, as are results for policies the file does not hold.
type kyvernoTest struct {
	APIVersion       string          `json:"apiVersion"`
	Kind             string          `json:"kind"`
	Policies         []string        `json:"policies"`
	Resources        []string        `json:"resources"`
	Context          string          `json:"context"`
	ClusterResources []string        `json:"clusterResources"`
	Results          []kyvernoResult `json:"results"`
	// Exceptions are files of PolicyExceptions.
	Exceptions []string `json:"exceptions"`
	// GlobalContextEntries are the data globalContext.Get reads.
	GlobalContextEntries []kyvernoEntry `json:"globalContextEntries"`
}

type kyvernoResult struct {
	Policy              string   `json:"policy"`
	Rule                string   `json:"rule"`
	Kind                string   `json:"kind"`
	Resources           []string `json:"resources"`
	Result              string   `json:"result"`
	GeneratedResource   string   `json:"generatedResource"`
	CloneSourceResource string   `json:"cloneSourceResource"`
	// Deprecated in Kyverno, still read: status for result, resource for
	// resources, namespace for a namespaced policy's.
	Status    string `json:"status"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`
}

// kyvernoCase runs the kyverno-test.yaml of dir.
func kyvernoCase(dir string) testCase {
	file := filepath.Join(dir, kyvernoTestFile)
	return testCase{name: file, run: func(ctx context.Context) []testRow {
		rows, err := runKyvernoTest(ctx, dir, file)
		if err != nil {
			return []testRow{{Case: file, Policy: "*", Resource: "*", Want: "-", Got: "error", Detail: err.Error()}}
		}
		return rows
	}}
}

// outcomeKey names one policy's evaluation for one trigger.
type outcomeKey struct{ policy, trigger string }

func runKyvernoTest(ctx context.Context, dir, file string) ([]testRow, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var t kyvernoTest
	if err := yamlbudget.Check(data, yamlbudget.ForText(len(data))); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := yaml.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if t.Kind != "" && (t.Kind != "Test" || !strings.HasPrefix(t.APIVersion, "cli.kyverno.io/")) {
		return nil, fmt.Errorf("%s: apiVersion %q kind %q is not a cli.kyverno.io Test", file, t.APIVersion, t.Kind)
	}
	rel := func(paths ...string) []string {
		var out []string
		for _, p := range paths {
			if p != "" {
				out = append(out, filepath.Join(dir, p))
			}
		}
		return out
	}
	policies, in, err := kyvernoInputs(t, dir, rel)
	if err != nil {
		return nil, err
	}
	outcomes := map[outcomeKey]evaluation{}
	compileErrs := map[string]error{}
	err = evaluate(ctx, policies, in, admission.Create, func(e evaluation) {
		if e.trigger == nil {
			compileErrs[policyName(e.policy)] = e.err
			return
		}
		outcomes[outcomeKey{policyName(e.policy), triggerName(e.trigger)}] = e
	})
	if err != nil {
		return nil, err
	}
	var rows []testRow
	for i, r := range t.Results {
		rows = append(rows, kyvernoRows(file, dir, i, r, in.triggers, outcomes, compileErrs)...)
	}
	return rows, nil
}

// kyvernoInputs reads the policies of a test and what they are evaluated
// with: the triggers, the objects to read, the exceptions of the policy
// files and of exceptions, and the globalContextEntries.
func kyvernoInputs(t kyvernoTest, dir string, rel func(...string) []string) ([]apiv1.Policy, offlineInputs, error) {
	var in offlineInputs
	policies, exceptions, err := readPolicies(rel(t.Policies...))
	if err != nil {
		return nil, in, fmt.Errorf("policies: %w", err)
	}
	given, err := readExceptions(rel(t.Exceptions...))
	if err != nil {
		return nil, in, fmt.Errorf("exceptions: %w", err)
	}
	in.exceptions = append(exceptions, given...)
	if in.triggers, err = readObjects(rel(t.Resources...)); err != nil {
		return nil, in, fmt.Errorf("resources: %w", err)
	}
	if in.objects, err = readContextObjects(rel(append([]string{t.Context}, t.ClusterResources...)...)); err != nil {
		return nil, in, fmt.Errorf("context: %w", err)
	}
	for i, r := range t.Results {
		objs, err := readObjects(rel(r.CloneSourceResource))
		if err != nil {
			return nil, in, fmt.Errorf("results[%d].cloneSourceResource: %w", i, err)
		}
		in.objects = append(in.objects, objs...)
	}
	if in.globalContext, err = mockEntries(dir, t.GlobalContextEntries); err != nil {
		return nil, in, err
	}
	return policies, in, nil
}

// readContextObjects reads object files, unwrapping Kyverno's Context
// (cli.kyverno.io/v1alpha1, spec.resources) into the objects it holds.
func readContextObjects(paths []string) ([]*unstructured.Unstructured, error) {
	objs, err := readObjects(paths)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() != "Context" || !strings.HasPrefix(o.GetAPIVersion(), "cli.kyverno.io/") {
			out = append(out, o)
			continue
		}
		items, _, err := unstructured.NestedSlice(o.Object, "spec", "resources")
		if err != nil {
			return nil, fmt.Errorf("the Context %s: spec.resources: %w", o.GetName(), err)
		}
		for j, item := range items {
			m, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("the Context %s: spec.resources[%d] is not an object", o.GetName(), j)
			}
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out, nil
}

// policyName is how a result names a policy: name, or namespace/name for a
// NamespacedGeneratingPolicy.
func policyName(p apiv1.Policy) string {
	if p.IsNamespaced() {
		return p.GetNamespace() + "/" + p.GetName()
	}
	return p.GetName()
}

// triggerName is how a result names a resource: Kind, then namespace/name
// or name.
func triggerName(t *unstructured.Unstructured) string {
	if t.GetNamespace() != "" {
		return t.GetKind() + " " + t.GetNamespace() + "/" + t.GetName()
	}
	return t.GetKind() + " " + t.GetName()
}

// kyvernoRows checks one result entry, one row per resource it names.
func kyvernoRows(file, dir string, i int, r kyvernoResult, triggers []*unstructured.Unstructured,
	outcomes map[outcomeKey]evaluation, compileErrs map[string]error) []testRow {
	want := strings.ToLower(r.Result)
	if want == "" {
		want = strings.ToLower(r.Status)
	}
	policy := r.Policy
	if r.Namespace != "" && !strings.Contains(policy, "/") {
		policy = r.Namespace + "/" + policy
	}
	names := r.Resources
	if len(names) == 0 && r.Resource != "" {
		names = []string{r.Resource}
	}
	var rows []testRow
	for _, name := range names {
		row := testRow{Case: file, Policy: policy, Resource: r.Kind + " " + name, Want: want}
		got, objs, detail := kyvernoOutcome(r, policy, name, triggers, outcomes, compileErrs)
		row.Got = got
		switch {
		case detail != "":
			row.Detail = detail
		case want != got && !(want == "fail" && got == "error"):
			row.Detail = fmt.Sprintf("results[%d]: want %s, got %s", i, want, got)
		case got == "pass" && r.GeneratedResource != "":
			row.Detail = compareGenerated(filepath.Join(dir, r.GeneratedResource), objs)
		}
		row.Pass = row.Detail == ""
		rows = append(rows, row)
	}
	return rows
}

// kyvernoOutcome finds what the policy did for the resource named: pass
// (it matched and evaluated, with the objects), skip (it did not match) or
// error; detail is set when the test itself is wrong.
func kyvernoOutcome(r kyvernoResult, policy, name string, triggers []*unstructured.Unstructured,
	outcomes map[outcomeKey]evaluation, compileErrs map[string]error) (string, []*unstructured.Unstructured, string) {
	var trigger *unstructured.Unstructured
	for _, t := range triggers {
		n := t.GetName()
		if strings.Contains(name, "/") {
			n = t.GetNamespace() + "/" + n
		}
		if n == name && (r.Kind == "" || t.GetKind() == r.Kind) {
			trigger = t
			break
		}
	}
	if trigger == nil {
		return "-", nil, fmt.Sprintf("no resource %s named %s in the test's resources", r.Kind, name)
	}
	if err, ok := compileErrs[policy]; ok {
		return "error", nil, errorDetail(r, err)
	}
	e, ok := outcomes[outcomeKey{policy, triggerName(trigger)}]
	switch {
	case ok && len(e.excepted) > 0:
		// Kyverno reports an excepted trigger as its exception says.
		return e.exceptedResult, nil, ""
	case !ok || e.skipped:
		return "skip", nil, ""
	case e.err != nil:
		return "error", nil, errorDetail(r, e.err)
	}
	return "pass", e.objects, ""
}

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
// trigger are left out of both, as kyverno test leaves out its own.
func compareObjects(want, got []*unstructured.Unstructured, ignoreBookkeeping bool) string {
	index := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			o = o.DeepCopy()
			if ignoreBookkeeping {
				dropBookkeeping(o)
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
	a, _ := objectYAML(want)
	b, _ := objectYAML(got)
	text, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b), FromFile: "want", ToFile: "got", Context: 3,
	})
	return text
}
