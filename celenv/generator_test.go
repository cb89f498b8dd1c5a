package celenv_test

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
)

// policyWith builds a policy triggered by Namespaces with the given variables
// (name, expression pairs) and one generate expression.
func policyWith(namespaced bool, generate string, variables ...string) apiv1.Policy {
	spec := apiv1.GeneratingPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}},
		},
		Generation: []apiv1.Generation{{Expression: generate}},
	}
	for i := 0; i+1 < len(variables); i += 2 {
		spec.Variables = append(spec.Variables, admissionregistrationv1.Variable{Name: variables[i], Expression: variables[i+1]})
	}
	meta := metav1.ObjectMeta{Name: "test-policy"}
	if namespaced {
		meta.Namespace = "team"
		return &apiv1.NamespacedGeneratingPolicy{ObjectMeta: meta, Spec: spec}
	}
	return &apiv1.GeneratingPolicy{ObjectMeta: meta, Spec: spec}
}

func object(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func TestGeneratorSemantics(t *testing.T) {
	cm := `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "elsewhere"}}`
	source := object("v1", "ConfigMap", "team", "shared")
	source.SetUID("uid-shared")
	other := object("v1", "ConfigMap", "other", "private")
	second := object("v1", "ConfigMap", "team", "second")
	second.SetUID("uid-second")
	reader := celenv.NewObjectReader([]*unstructured.Unstructured{source, other, second})

	type want struct {
		objects []string // kind namespace/name of each generated object
		err     string
		missing string // a clone source reported missing
	}
	tests := []struct {
		name       string
		namespaced bool
		generate   string
		want       want
	}{
		{name: "namespace argument overrides the object's", generate: `generator.Apply("ns-x", [` + cm + `])`,
			want: want{objects: []string{"ConfigMap ns-x/cm"}}},
		{name: "lower-case apply", generate: `generator.apply("ns-x", [` + cm + `])`,
			want: want{objects: []string{"ConfigMap ns-x/cm"}}},
		{name: "empty namespace keeps the object's", generate: `generator.Apply("", [` + cm + `])`,
			want: want{objects: []string{"ConfigMap elsewhere/cm"}}},
		{name: "cluster-scoped kinds get no namespace",
			generate: `generator.Apply("ns-x", [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "viewer"}}])`,
			want:     want{objects: []string{"ClusterRole /viewer"}}},
		{name: "List objects are expanded", generate: `generator.Apply("ns-x", [resource.List("v1", "configmaps", "team")])`,
			want: want{objects: []string{"ConfigMap ns-x/second", "ConfigMap ns-x/shared"}}},
		{name: "one object instead of a list", generate: `generator.Apply("ns-x", ` + cm + `)`,
			want: want{objects: []string{"ConfigMap ns-x/cm"}}},
		{name: "GVR form of resource.List", generate: `generator.Apply("ns-x", [resource.List(resource.ToGVR("v1", "ConfigMap"), "team", {"app": "x"})])`,
			want: want{}},
		{name: "GVR form of resource.Get", generate: `generator.Apply("ns-x", [resource.Get(resource.ToGVR("v1", "ConfigMap"), "team", "second")])`,
			want: want{objects: []string{"ConfigMap ns-x/second"}}},
		{name: "ToGVR names the resource",
			generate: `resource.ToGVR("networking.k8s.io/v1", "NetworkPolicy") == {"group": "networking.k8s.io", "version": "v1", "resource": "networkpolicies"} && generator.Apply("a", [` + cm + `])`,
			want:     want{objects: []string{"ConfigMap a/cm"}}},
		{name: "empty list generates nothing", generate: `generator.Apply("ns-x", [])`, want: want{}},
		{name: "composes inside all()", generate: `["a", "b"].all(n, generator.Apply(n, [` + cm + `]))`,
			want: want{objects: []string{"ConfigMap a/cm", "ConfigMap b/cm"}}},
		{name: "foreach returns a list of bools", generate: `["a", "b"].map(n, generator.Apply(n, [` + cm + `]))`,
			want: want{objects: []string{"ConfigMap a/cm", "ConfigMap b/cm"}}},
		{name: "the same object twice is kept once", generate: `generator.Apply("a", [` + cm + `, ` + cm + `])`,
			want: want{objects: []string{"ConfigMap a/cm"}}},
		{name: "nested list is rejected", generate: `generator.Apply("ns-x", [[` + cm + `]])`,
			want: want{err: "list[0] is a list, not an object"}},
		{name: "object without a name is rejected", generate: `generator.Apply("ns-x", [{"apiVersion": "v1", "kind": "ConfigMap"}])`,
			want: want{err: "needs apiVersion, kind and metadata.name"}},
		{name: "namespaced policy: one argument, its namespace", namespaced: true,
			generate: `generator.Apply([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}])`,
			want:     want{objects: []string{"ConfigMap team/cm"}}},
		{name: "namespaced policy: clone from its namespace", namespaced: true,
			generate: `generator.Apply([resource.Get("v1", "configmaps", "team", "shared").setField("metadata.name", "copy")])`,
			want:     want{objects: []string{"ConfigMap team/copy"}}},
		{name: "namespaced policy: Kyverno's form names its own namespace", namespaced: true,
			generate: `generator.Apply("team", [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}])`,
			want:     want{objects: []string{"ConfigMap team/cm"}}},
		{name: "namespaced policy: Kyverno's form refuses another namespace", namespaced: true,
			generate: `generator.Apply("other", [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}])`,
			want:     want{err: `cross-namespace generation denied: policy in "team" cannot generate into "other"`}},
		{name: "namespaced policy: Kyverno's resource.Get without a namespace", namespaced: true,
			generate: `generator.Apply("team", [resource.Get("v1", "configmaps", "shared").setField("metadata.name", "copy")])`,
			want:     want{objects: []string{"ConfigMap team/copy"}}},
		{name: "namespaced policy: Kyverno's resource.List without a namespace", namespaced: true,
			generate: `generator.Apply("team", resource.List("v1", "configmaps").items.map(c, c.setField("metadata.name", c.metadata.name + "-copy")))`,
			want:     want{objects: []string{"ConfigMap team/second-copy", "ConfigMap team/shared-copy"}}},
		{name: "namespaced policy: resource.List by GVR and labels", namespaced: true,
			generate: `generator.Apply("team", [resource.List(resource.ToGVR("v1", "ConfigMap"), {"app": "x"})])`,
			want:     want{}},
		{name: "namespaced policy: resource.Get by GVR", namespaced: true,
			generate: `generator.Apply([resource.Get(resource.ToGVR("v1", "ConfigMap"), "shared").setField("metadata.name", "copy")])`,
			want:     want{objects: []string{"ConfigMap team/copy"}}},
		{name: "namespaced policy cannot write elsewhere", namespaced: true, generate: `generator.Apply([` + cm + `])`,
			want: want{err: `outside namespace "team"`}},
		{name: "namespaced policy cannot read elsewhere", namespaced: true,
			generate: `generator.Apply([resource.Get("v1", "configmaps", "other", "private")])`,
			want:     want{err: `cannot read namespace "other"`}},
		{name: "namespaced policy cannot list all namespaces", namespaced: true,
			generate: `generator.Apply([resource.List("v1", "configmaps", "")])`,
			want:     want{err: `cannot read namespace ""`}},
		{name: "namespaced policy cannot write cluster-scoped kinds", namespaced: true,
			generate: `generator.Apply([{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "viewer"}}])`,
			want:     want{err: "is cluster-scoped"}},
		{name: "missing clone source generates nothing", generate: `generator.Apply("a", [resource.Get("v1", "configmaps", "team", "absent")])`,
			want: want{missing: "configmaps team/absent"}},
	}
	trigger := object("v1", "ConfigMap", "team", "trigger")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prog := celenv.Compile(policyWith(tt.namespaced, tt.generate))
			if err := prog.Err(); err != nil {
				t.Fatal(err)
			}
			res, err := prog.Evaluate(context.Background(), celenv.Input{
				Object: trigger.Object, Scopes: celenv.BuiltinScopes{}, Reader: reader,
				Request: celenv.Request{Operation: "CREATE", Name: "trigger", Namespace: "team"},
			})
			if tt.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want.err) {
					t.Fatalf("want error containing %q, got %v", tt.want.err, err)
				}
				if !strings.Contains(err.Error(), "spec.generate[0].expression") {
					t.Errorf("error %q does not name the field path", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(res.MissingSources, ","); got != tt.want.missing {
				t.Errorf("missing sources %q, want %q", got, tt.want.missing)
			}
			var got []string
			for _, g := range res.Objects {
				got = append(got, g.Object.GetKind()+" "+g.Object.GetNamespace()+"/"+g.Object.GetName())
			}
			if strings.Join(got, ",") != strings.Join(tt.want.objects, ",") {
				t.Fatalf("generated %v, want %v", got, tt.want.objects)
			}
		})
	}
}

// A source read without a UID (render's context files may have none) is
// still a clone, and renaming it makes a new object, not the source again.
func TestARenamedCloneOfASourceWithoutUIDIsKept(t *testing.T) {
	source := object("v1", "ConfigMap", "team", "plain")
	source.SetResourceVersion("7")
	reader := celenv.NewObjectReader([]*unstructured.Unstructured{source})
	prog := celenv.Compile(policyWith(false,
		`generator.Apply("team", [resource.Get("v1", "configmaps", "team", "plain").setField("metadata.name", "copy")])`))
	res, err := prog.Evaluate(context.Background(), celenv.Input{Object: source.Object, Reader: reader})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 1 || res.Objects[0].Object.GetName() != "copy" {
		t.Fatalf("want the copy generated, got %d objects", len(res.Objects))
	}
}

func TestClonesAreTracedToTheirSource(t *testing.T) {
	source := object("v1", "Secret", "default", "regcred")
	source.SetUID("uid-regcred")
	source.SetResourceVersion("42")
	reader := celenv.NewObjectReader([]*unstructured.Unstructured{source})
	prog := celenv.Compile(policyWith(false,
		`generator.Apply("team", [resource.Get("v1", "secrets", "default", "regcred").setField("metadata.namespace", "moved")])`))
	res, err := prog.Evaluate(context.Background(), celenv.Input{Object: source.Object, Reader: reader})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 1 {
		t.Fatalf("want one object, got %d", len(res.Objects))
	}
	g := res.Objects[0]
	if src := g.ClonedFrom; src == nil || src.Namespace != "default" || src.Name != "regcred" || src.UID != "uid-regcred" {
		t.Errorf("ClonedFrom = %+v, want default/regcred uid-regcred", g.ClonedFrom)
	}
	if g.Object.GetUID() != "" || g.Object.GetResourceVersion() != "" {
		t.Errorf("server metadata kept on the clone: %v", g.Object.Object["metadata"])
	}
}

// TestACloneIsWhatCarriesAResourceVersion: Kyverno's rule, field by field.
func TestACloneIsWhatCarriesAResourceVersion(t *testing.T) {
	source := object("v1", "Secret", "default", "regcred")
	source.SetUID("uid-regcred")
	source.SetResourceVersion("42")
	reader := celenv.NewObjectReader([]*unstructured.Unstructured{source})
	get := `resource.Get("v1", "secrets", "default", "regcred")`
	for _, tt := range []struct {
		name, metadata string
		clone          bool
		uid            string
	}{
		{"fields", `"name": "fields"`, false, ""},
		{"uid", `"name": "uid", "uid": ` + get + `.metadata.uid`, false, ""},
		{"rv", `"name": "rv", "resourceVersion": ` + get + `.metadata.resourceVersion`, true, ""},
		{"both", `"name": "both", "uid": ` + get + `.metadata.uid, "resourceVersion": "42"`, true, "uid-regcred"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prog := celenv.Compile(policyWith(false,
				`generator.Apply("team", [{"apiVersion": "v1", "kind": "Secret", "metadata": {`+tt.metadata+`}}])`))
			res, err := prog.Evaluate(context.Background(), celenv.Input{Object: source.Object, Reader: reader})
			if err != nil {
				t.Fatal(err)
			}
			src := res.Objects[0].ClonedFrom
			if (src != nil) != tt.clone || src != nil && src.UID != tt.uid {
				t.Errorf("ClonedFrom = %+v, want clone %t with UID %q", src, tt.clone, tt.uid)
			}
		})
	}
}

// TestEvaluationLeavesItsInputsAlone: what a program generates from its
// trigger, the trigger itself or a part of it, shares no map with it, and
// changing what was generated (as labelling does) leaves the trigger as it
// was. Sprout hands the program its cached objects without a copy.
func TestEvaluationLeavesItsInputsAlone(t *testing.T) {
	trigger := object("v1", "ConfigMap", "team", "trigger")
	trigger.SetLabels(map[string]string{"app": "x"})
	_ = unstructured.SetNestedStringMap(trigger.Object, map[string]string{"k": "v"}, "data")
	before := trigger.DeepCopy()
	prog := celenv.Compile(policyWith(false, `generator.Apply("ns-x", [object.setField("metadata.name", "copy"), `+
		`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "parts", "labels": object.metadata.labels}, "data": object.data}])`))
	if err := prog.Err(); err != nil {
		t.Fatal(err)
	}
	res, err := prog.Evaluate(context.Background(), celenv.Input{Object: trigger.Object, OldObject: trigger.Object,
		Request: celenv.Request{Operation: "UPDATE", Name: "trigger", Namespace: "team"}})
	if err != nil || len(res.Objects) != 2 {
		t.Fatalf("%d objects, error %v", len(res.Objects), err)
	}
	for _, g := range res.Objects {
		g.Object.SetLabels(map[string]string{"app": "changed", "more": "labels"})
		_ = unstructured.SetNestedField(g.Object.Object, "changed", "data", "k")
		g.Object.SetNamespace("changed")
	}
	if !equality.Semantic.DeepEqual(trigger.Object, before.Object) {
		t.Errorf("the trigger changed with what was generated from it:\n%v\nwas\n%v", trigger.Object, before.Object)
	}
}

// A policy reads namespaceObject when any of its expressions names it, in
// whichever part of the policy, a template's placeholders as CEL reads
// them (after YAML's escapes): a Namespace's change other than its labels
// matters to it, and to no other policy. The same holds of oldObject for
// ReadsEvent.
func TestReadsNamespaceWhereverAnExpressionNamesIt(t *testing.T) {
	const reads = `has(namespaceObject.metadata.annotations)`
	apply := `generator.Apply(object.metadata.namespace, [dyn({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "x"}})])`
	template := func(value string) func(*apiv1.GeneratingPolicySpec) {
		return func(s *apiv1.GeneratingPolicySpec) {
			s.Generation[0] = apiv1.Generation{Template: &apiv1.Template{Value: value, Interpolate: apiv1.InterpolateCEL}}
		}
	}
	for _, c := range []struct {
		name           string
		edit           func(*apiv1.GeneratingPolicySpec)
		namespace, old bool
	}{
		{"none", func(*apiv1.GeneratingPolicySpec) {}, false, false},
		{"matchConditions", func(s *apiv1.GeneratingPolicySpec) {
			s.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "ns", Expression: reads}}
		}, true, false},
		{"variables", func(s *apiv1.GeneratingPolicySpec) {
			s.Variables = []admissionregistrationv1.Variable{{Name: "ns", Expression: reads}}
		}, true, false},
		{"generate", func(s *apiv1.GeneratingPolicySpec) {
			s.Generation[0].Expression = strings.Replace(apply, `"x"`, `string(`+reads+`)`, 1)
		}, true, false},
		{"template", template("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: (( string(" + reads + ") ))}\n"), true, false},
		{"template, escaped in YAML", template(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "(( namespace\u004fbject.metadata.name ))"}}`), true, false},
		{"auditAnnotations", func(s *apiv1.GeneratingPolicySpec) {
			s.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "ns", ValueExpression: `string(` + reads + `)`}}
		}, true, false},
		{"auditAnnotations, oldObject", func(s *apiv1.GeneratingPolicySpec) {
			s.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "old", ValueExpression: `string(oldObject != null)`}}
		}, false, true},
	} {
		p := policyWith(false, apply).(*apiv1.GeneratingPolicy)
		c.edit(&p.Spec)
		prog := celenv.Compile(p)
		if err := prog.Err(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := prog.ReadsNamespace(); got != c.namespace {
			t.Errorf("%s: ReadsNamespace %v, want %v", c.name, got, c.namespace)
		}
		if got := prog.ReadsEvent(); got != c.old {
			t.Errorf("%s: ReadsEvent %v, want %v", c.name, got, c.old)
		}
	}
}
