package offline

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/sources"
)

// kyvernoCase runs the results sel picks of the Kyverno test file of dir
// named testFile.
func kyvernoCase(dir, testFile string, sel Selector) Case {
	file := filepath.Join(dir, testFile)
	return Case{Name: file, Run: func(ctx context.Context) []Row {
		rows, err := runKyvernoTest(ctx, dir, file, sel)
		if err != nil {
			return []Row{{Case: file, Policy: "*", Resource: "*", Want: "-", Got: "error", Detail: err.Error()}}
		}
		return rows
	}}
}

// testFileLimits bound a kyverno-test.yaml and the values file it names,
// as one policy file is bounded: a test is written by hand, and a link to
// /dev/zero must not be read for ever.
var testFileLimits = sources.Limits{FileSize: sources.MaxFileSize, TotalSize: sources.MaxFileSize, Files: 1}

// readTestFile reads a file of a test within testFileLimits.
func readTestFile(path string) ([]byte, error) {
	files, err := sources.ReadFiles(path, nil, testFileLimits)
	if err != nil {
		return nil, err
	}
	if len(files) != 1 {
		return nil, fmt.Errorf("%s: a folder, where a file is wanted", path)
	}
	return files[0].Data, nil
}

// outcomeKey names one policy's evaluation for one trigger.
type outcomeKey struct{ policy, trigger string }

func runKyvernoTest(ctx context.Context, dir, file string, sel Selector) ([]Row, error) {
	data, err := readTestFile(file)
	if err != nil {
		return nil, err
	}
	t, err := decodeTest(file, data)
	if err != nil {
		return nil, err
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
	policies, others, in, err := kyvernoInputs(t, dir, rel)
	if err != nil {
		return nil, err
	}
	outcomes := map[outcomeKey]Evaluation{}
	compileErrs := map[string]error{}
	err = EvaluateAll(ctx, policies, in, admission.Create, func(e Evaluation) {
		if e.Trigger == nil {
			compileErrs[policyName(e.Policy)] = e.Err
			return
		}
		outcomes[outcomeKey{policyName(e.Policy), triggerName(e.Trigger)}] = e
	})
	if err != nil {
		return nil, err
	}
	run := kyvernoRun{file: file, dir: dir, triggers: in.Triggers, outcomes: outcomes, compileErrs: compileErrs,
		byName: map[string][]string{}, others: others}
	for _, p := range policies {
		run.byName[p.GetName()] = append(run.byName[p.GetName()], policyName(p))
	}
	var rows []Row
	for i, r := range t.Results {
		if sel.selects(r) {
			rows = append(rows, run.rows(i, r)...)
		}
	}
	if len(t.Checks) > 0 {
		rows = append(rows, Row{Case: file, Policy: "*", Resource: "*", Want: "checks", Got: "-",
			Detail: fmt.Sprintf("checks: %d assertions on Kyverno's rule responses, which sprout test cannot run: state them as results", len(t.Checks))})
	}
	return rows, nil
}

// kyvernoRun is what a kyverno-test.yaml's results are checked against.
type kyvernoRun struct {
	file, dir   string
	triggers    []*unstructured.Unstructured
	outcomes    map[outcomeKey]Evaluation
	compileErrs map[string]error
	// byName lists the policies of each name, as results name them.
	byName map[string][]string
	// others are the test's policies Sprout does not run.
	others otherPolicies
}

// kyvernoInputs reads the generating policies of a test (and the names of
// the others, which Sprout does not run) and what they are evaluated
// with: the triggers, the objects to read, the exceptions of the policy
// files and of exceptions, and the globalContextEntries.
func kyvernoInputs(t kyvernoTest, dir string, rel func(...string) []string) ([]apiv1.Policy, otherPolicies, Inputs, error) {
	var in Inputs
	policies, exceptions, others, err := readTestPolicies(rel(t.Policies...))
	if err != nil {
		return nil, nil, in, fmt.Errorf("policies: %w", err)
	}
	given, err := ReadExceptions(rel(t.Exceptions...))
	if err != nil {
		return nil, nil, in, fmt.Errorf("exceptions: %w", err)
	}
	in.Exceptions = append(exceptions, given...)
	if in.Triggers, err = ReadObjects(rel(t.Resources...)); err != nil {
		return nil, nil, in, fmt.Errorf("resources: %w", err)
	}
	if in.Objects, _, err = readContextObjects(rel(t.Context), dir); err != nil {
		return nil, nil, in, fmt.Errorf("context: %w", err)
	}
	cluster, scopes, err := readContextObjects(rel(t.ClusterResources...), dir)
	if err != nil {
		return nil, nil, in, fmt.Errorf("clusterResources: %w", err)
	}
	in.Objects = append(in.Objects, cluster...)
	if len(scopes) > 0 {
		in.Scopes = scopes
	}
	if in.Namespaces, err = readValues(t, dir); err != nil {
		return nil, nil, in, err
	}
	for i, r := range t.Results {
		objs, err := ReadObjects(rel(r.CloneSourceResource))
		if err != nil {
			return nil, nil, in, fmt.Errorf("results[%d].cloneSourceResource: %w", i, err)
		}
		in.Objects = append(in.Objects, objs...)
	}
	if in.GlobalContext, err = mockEntries(dir, t.GlobalContextEntries); err != nil {
		return nil, nil, in, err
	}
	return policies, others, in, nil
}

// readContextObjects reads object files, unwrapping Kyverno's Context and
// ClusterResource (cli.kyverno.io/v1alpha1, spec.resources) into the
// objects they hold. The CustomResourceDefinitions among them, and those a
// ClusterResource names in spec.crds (files relative to dir, as Kyverno
// reads them from the test's folder; "": the ClusterResource's own), are
// objects too and give the scope of their kinds.
func readContextObjects(paths []string, dir string) ([]*unstructured.Unstructured, celenv.KindScopes, error) {
	var out []*unstructured.Unstructured
	err := eachFile(paths, objectLimits, func(path string, data []byte) error {
		objs, err := manifest.Parse(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		base := dir
		if base == "" {
			base = filepath.Dir(path)
		}
		unwrapped, err := unwrapContext(objs, base)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, unwrapped...)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	scopes := celenv.KindScopes{}
	for _, o := range out {
		if o.GetKind() != "CustomResourceDefinition" || o.GroupVersionKind().Group != "apiextensions.k8s.io" {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		if kind != "" {
			scopes[schema.GroupKind{Group: group, Kind: kind}] = scope != "Cluster"
		}
	}
	return out, scopes, nil
}

// unwrapContext replaces each Context and ClusterResource among objs with
// the objects it holds, and the CRD files it names, relative to dir.
func unwrapContext(objs []*unstructured.Unstructured, dir string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		kind := o.GetKind()
		if (kind != "Context" && kind != "ClusterResource") || !strings.HasPrefix(o.GetAPIVersion(), "cli.kyverno.io/") {
			out = append(out, o)
			continue
		}
		items, _, err := unstructured.NestedSlice(o.Object, "spec", "resources")
		if err != nil {
			return nil, fmt.Errorf("the %s %s: spec.resources: %w", kind, o.GetName(), err)
		}
		for j, item := range items {
			m, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("the %s %s: spec.resources[%d] is not an object", kind, o.GetName(), j)
			}
			out = append(out, &unstructured.Unstructured{Object: m})
		}
		crdFiles, _, err := unstructured.NestedStringSlice(o.Object, "spec", "crds")
		if err != nil {
			return nil, fmt.Errorf("the %s %s: spec.crds: %w", kind, o.GetName(), err)
		}
		for _, f := range crdFiles {
			crds, err := ReadObjects([]string{filepath.Join(dir, f)})
			if err != nil {
				return nil, fmt.Errorf("the %s %s: spec.crds: %w", kind, o.GetName(), err)
			}
			out = append(out, crds...)
		}
	}
	return out, nil
}

// readValues returns the Namespaces a test's values give (its values, or
// else its variables file), as Kyverno's CLI resolves a trigger's
// Namespace: namespaces first, then namespaceSelector, which gives labels
// only.
func readValues(t kyvernoTest, dir string) ([]*corev1.Namespace, error) {
	v := t.Values
	if v == nil && t.Variables != "" {
		path := filepath.Join(dir, t.Variables)
		data, err := readTestFile(path)
		if err != nil {
			return nil, fmt.Errorf("variables: %w", err)
		}
		v = &kyvernoValues{}
		if err := yaml.Unmarshal(data, v); err != nil {
			return nil, fmt.Errorf("variables: %s: %w", path, err)
		}
	}
	if v == nil {
		return nil, nil
	}
	var out []*corev1.Namespace
	named := map[string]bool{}
	for i := range v.Namespaces {
		ns := v.Namespaces[i].DeepCopy()
		if !named[ns.Name] {
			named[ns.Name] = true
			out = append(out, ns)
		}
	}
	for _, sel := range v.NamespaceSelectors {
		if !named[sel.Name] {
			named[sel.Name] = true
			out = append(out, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sel.Name, Labels: sel.Labels}})
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

// rows checks one result entry, one row per resource it names.
func (k kyvernoRun) rows(i int, r kyvernoResult) []Row {
	want := strings.ToLower(r.Result)
	if want == "" {
		want = strings.ToLower(r.Status)
	}
	policy := r.Policy
	if r.Namespace != "" && !strings.Contains(policy, "/") {
		policy = r.Namespace + "/" + policy
	}
	notRun := k.notRun(policy)
	var rows []Row
	for _, res := range resourcesOf(r) {
		row := Row{Case: k.file, Policy: policy, Resource: res.kind + " " + res.name, Want: want}
		if notRun != "" {
			row.Got, row.NotRun, row.Pass = "-", notRun, true
			rows = append(rows, row)
			continue
		}
		got, objs, detail := k.outcome(r, policy, res)
		row.Got = got
		var diff string
		if got == "pass" && r.GeneratedResource != "" && detail == "" {
			diff = compareGenerated(filepath.Join(k.dir, r.GeneratedResource), objs)
		}
		switch {
		case detail != "":
			row.Detail = detail
		case want == "fail" && (got == "error" || diff != ""):
			// Kyverno's CLI counts a failing case as expected when fail is
			// what the result wants: for a generating policy, an error, or
			// objects other than the generatedResource file holds.
		case want != got:
			row.Detail = fmt.Sprintf("results[%d]: want %s, got %s", i, want, got)
		case diff != "":
			row.Detail = diff
		}
		row.Pass = row.Detail == ""
		rows = append(rows, row)
	}
	return rows
}

// notRun says why the policy a result names is not run, when it is one
// of the test's policies of another kind than Sprout runs, and none of its
// generating policies has its name: "" when Sprout runs it.
func (k kyvernoRun) notRun(policy string) string {
	short := policy[strings.LastIndex(policy, "/")+1:]
	if len(k.byName[short]) > 0 {
		return ""
	}
	kind, ok := k.others[policy]
	if !ok {
		kind, ok = k.others[short]
	}
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s %s is not a generating policy: sprout test runs generating policies only (kyverno test runs it)", kind, policy)
}

// outcome finds what the policy did for the resource named: pass (it
// matched and evaluated, with the objects), skip (it did not match, or an
// exception skipped it), an excepted trigger's reportResult, or error;
// detail is set when the test itself is wrong.
func (k kyvernoRun) outcome(r kyvernoResult, policy string, res named) (string, []*unstructured.Unstructured, string) {
	trigger := findTrigger(k.triggers, res.kind, res.name)
	if trigger == nil {
		return "-", nil, fmt.Sprintf("no resource %s named %s in the test's resources", res.kind, res.name)
	}
	full, detail := k.resolve(policy)
	if detail != "" {
		return "-", nil, detail
	}
	if err, ok := k.compileErrs[full]; ok {
		return "error", nil, errorDetail(r, err)
	}
	e, ok := k.outcomes[outcomeKey{full, triggerName(trigger)}]
	switch {
	case ok && len(e.Excepted) > 0:
		// Kyverno reports an excepted trigger as its exception says.
		return e.ExceptedResult, nil, ""
	case !ok || e.Skipped:
		return "skip", nil, ""
	case e.Err != nil:
		return "error", nil, errorDetail(r, e.Err)
	}
	return "pass", e.Objects, ""
}

// findTrigger finds the resource a result names, name or namespace/name:
// of the kind the result gives, or else of any kind, as Kyverno's CLI,
// which names resources without their kind, finds it.
func findTrigger(triggers []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	var anyKind *unstructured.Unstructured
	for _, t := range triggers {
		n := t.GetName()
		if strings.Contains(name, "/") {
			n = t.GetNamespace() + "/" + n
		}
		if n != name {
			continue
		}
		if kind == "" || t.GetKind() == kind {
			return t
		}
		if anyKind == nil {
			anyKind = t
		}
	}
	return anyKind
}

// resolve finds the policy a result names: name, or namespace/name for a
// NamespacedGeneratingPolicy; a name alone also names the one namespaced
// policy of that name, as Kyverno's CLI compares names alone. A name no
// policy of the test has fails, as kyverno test fails it (not found).
func (k kyvernoRun) resolve(policy string) (string, string) {
	found := k.byName[policy[strings.LastIndex(policy, "/")+1:]]
	switch {
	case slices.Contains(found, policy):
		return policy, ""
	case len(found) == 0 || strings.Contains(policy, "/"):
		return "", fmt.Sprintf("no policy %s among the test's policies", policy)
	case len(found) == 1:
		return found[0], ""
	default:
		return "", fmt.Sprintf("policy %s names %s: give namespace/name", policy, strings.Join(found, ", "))
	}
}
