package celenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
)

func exception(name string, conditions ...string) *apiv1.PolicyException {
	e := &apiv1.PolicyException{
		ObjectMeta: metav1.ObjectMeta{Namespace: "exceptions", Name: name},
		Spec:       apiv1.PolicyExceptionSpec{PolicyRefs: []apiv1.PolicyRef{{Kind: "GeneratingPolicy", Name: "test-policy"}}},
	}
	for i, c := range conditions {
		e.Spec.MatchConditions = append(e.Spec.MatchConditions, admissionregistrationv1.MatchCondition{Name: "c" + string(rune('0'+i)), Expression: c})
	}
	return e
}

func TestExceptionsExceptTriggersBeforeThePolicyMatches(t *testing.T) {
	const cm = `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "out"}}`
	policy := policyWith(false, `generator.Apply("team", [`+cm+`])`)
	policy.PolicySpec().MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "fails", Expression: `object.metadata.labels.missing == "x"`}}
	prog := celenv.Compile(policy)
	if err := prog.Err(); err != nil {
		t.Fatal(err)
	}
	trigger := object("v1", "ConfigMap", "team", "trigger")
	trigger.SetLabels(map[string]string{"tier": "legacy"})
	compile := func(e *apiv1.PolicyException) *celenv.Exception {
		t.Helper()
		c, err := celenv.CompileException(e)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tests := []struct {
		name       string
		exceptions []*celenv.Exception
		excepted   string
		err        string
	}{
		{name: "all conditions hold", exceptions: []*celenv.Exception{compile(exception("legacy", `object.metadata.labels.tier == "legacy"`, `object.metadata.namespace == "team"`))},
			excepted: "exceptions/legacy"},
		{name: "no conditions: every trigger", exceptions: []*celenv.Exception{compile(exception("all"))}, excepted: "exceptions/all"},
		{name: "two exceptions", exceptions: []*celenv.Exception{compile(exception("all")), compile(exception("other", `true`))},
			excepted: "exceptions/all,exceptions/other"},
		{name: "a condition that does not hold", exceptions: []*celenv.Exception{compile(exception("prod", `object.metadata.labels.tier == "prod"`))},
			err: "spec.matchConditions[0].expression: no such key: missing"}, // the policy's own condition, which runs then
		{name: "a condition that fails names the exception", exceptions: []*celenv.Exception{compile(exception("broken", `object.spec.missing == 1`))},
			err: "PolicyException exceptions/broken: spec.matchConditions[0].expression: no such key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := prog.Evaluate(context.Background(), celenv.Input{Object: trigger.Object, Exceptions: tt.exceptions,
				Request: celenv.Request{Operation: "CREATE", Name: "trigger", Namespace: "team"}})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("want an error containing %q, got %v", tt.err, err)
				}
				if strings.Contains(tt.err, "PolicyException") != strings.Contains(err.Error(), "PolicyException") {
					t.Fatalf("error %q: the exception is named where it should not be, or not where it should", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(res.Excepted, ","); got != tt.excepted || len(res.Objects) != 0 || res.Matched {
				t.Fatalf("excepted %q, objects %d, matched %v; want excepted %q and nothing generated", got, len(res.Objects), res.Matched, tt.excepted)
			}
		})
	}
}

func TestExceptionsAreCheckedWhenCompiled(t *testing.T) {
	noRefs := exception("no-refs")
	noRefs.Spec.PolicyRefs = nil
	badRef := exception("bad-ref")
	badRef.Spec.PolicyRefs = []apiv1.PolicyRef{{Name: "x"}}
	badResult := exception("bad-result")
	badResult.Spec.ReportResult = "fail"
	for _, tc := range []struct {
		e    *apiv1.PolicyException
		want string
	}{
		{exception("syntax", `object.metadata.name ==`), "PolicyException exceptions/syntax: spec.matchConditions[0].expression"},
		{exception("not-bool", `"yes"`), "spec.matchConditions[0].expression"},
		{exception("variables", `variables.x == 1`), "spec.matchConditions[0].expression"},
		{noRefs, "spec.policyRefs: Required value"},
		{badRef, "spec.policyRefs[0].kind: Required value"},
		{badResult, `spec.reportResult: Unsupported value: "fail"`},
	} {
		if _, err := celenv.CompileException(tc.e); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error containing %q, got %v", tc.e.Name, tc.want, err)
		}
	}
}

func TestExceptionNamesItsPoliciesAndExpires(t *testing.T) {
	e := exception("x")
	e.Spec.PolicyRefs = append(e.Spec.PolicyRefs, apiv1.PolicyRef{Kind: "NamespacedGeneratingPolicy", Name: "team-policy"})
	cluster := &apiv1.GeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "test-policy"}}
	namespaced := &apiv1.NamespacedGeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-policy", Namespace: "team"}}
	sameNameOtherKind := &apiv1.NamespacedGeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "test-policy", Namespace: "team"}}
	if !e.AppliesTo(cluster) || !e.AppliesTo(namespaced) || e.AppliesTo(sameNameOtherKind) {
		t.Errorf("AppliesTo: %v %v %v, want true true false", e.AppliesTo(cluster), e.AppliesTo(namespaced), e.AppliesTo(sameNameOtherKind))
	}
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	if e.Expired(now) {
		t.Error("an exception without expiresAt expired")
	}
	e.Spec.ExpiresAt = &metav1.Time{Time: now}
	if e.Expired(now) || !e.Expired(now.Add(time.Second)) {
		t.Error("expiresAt: want in force at the instant, expired after")
	}
}

// TestExceptionsVariable: the exceptions variable of Kyverno's CEL policies
// is declared, and holds the spec.images and spec.allowedValues of the
// exceptions that match the trigger; an exception that names either lets
// the policy run instead of skipping it, unless another matching one names
// neither.
func TestExceptionsVariable(t *testing.T) {
	const gen = `generator.Apply("team", [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "out"},
		"data": {"images": variables.images.join(","), "values": variables.values.join(",")}}])`
	prog := celenv.Compile(policyWith(false, gen,
		"images", `exceptions.allowedImages`,
		"values", `exceptions.allowedValues`))
	if err := prog.Err(); err != nil {
		t.Fatal(err)
	}
	if err := celenv.Compile(policyWith(false, gen, "images", `exceptions.allowed`, "values", `[]`)).Err(); err == nil ||
		!strings.Contains(err.Error(), "exceptions has no field allowed") {
		t.Errorf("a field exceptions does not have: want a compile error, got %v", err)
	}
	trigger := object("v1", "ConfigMap", "team", "trigger")
	trigger.SetLabels(map[string]string{"tier": "legacy"})
	compile := func(name, condition string, images, values []string) *celenv.Exception {
		t.Helper()
		e := exception(name, condition)
		e.Spec.Images, e.Spec.AllowedValues = images, values
		c, err := celenv.CompileException(e)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	matches, misses := `object.metadata.labels.tier == "legacy"`, `object.metadata.labels.tier == "prod"`
	tests := []struct {
		name           string
		exceptions     []*celenv.Exception
		images, values string
		excepted       string
	}{
		{name: "no exception"},
		{name: "an exception that does not match", exceptions: []*celenv.Exception{compile("prod", misses, []string{"nginx:1"}, []string{"x"})}},
		{name: "the matching exceptions, in order", exceptions: []*celenv.Exception{
			compile("values", matches, nil, []string{"a", "b"}),
			compile("prod", misses, []string{"busybox:1"}, []string{"z"}),
			compile("images", matches, []string{"nginx:latest"}, []string{"c"}),
		}, images: "nginx:latest", values: "a,b,c"},
		{name: "a matching exception without images or values skips the trigger", exceptions: []*celenv.Exception{
			compile("values", matches, nil, []string{"a"}),
			compile("all", matches, nil, nil),
		}, excepted: "exceptions/values,exceptions/all"},
		{name: "an exception that fails after one skipped the trigger does not take it back", exceptions: []*celenv.Exception{
			compile("all", matches, nil, nil),
			compile("broken", `object.spec.missing == 1`, nil, []string{"a"}),
		}, excepted: "exceptions/all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := prog.Evaluate(context.Background(), celenv.Input{Object: trigger.Object, Exceptions: tt.exceptions,
				Request: celenv.Request{Operation: "CREATE", Name: "trigger", Namespace: "team"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(res.Excepted, ","); got != tt.excepted {
				t.Fatalf("excepted %q, want %q", got, tt.excepted)
			}
			if tt.excepted != "" {
				if len(res.Objects) != 0 {
					t.Fatalf("an excepted trigger generated %d objects", len(res.Objects))
				}
				return
			}
			if len(res.Objects) != 1 {
				t.Fatalf("generated %d objects, want 1", len(res.Objects))
			}
			data := res.Objects[0].Object.Object["data"].(map[string]any)
			if data["images"] != tt.images || data["values"] != tt.values {
				t.Errorf("exceptions.allowedImages %q, allowedValues %q; want %q and %q", data["images"], data["values"], tt.images, tt.values)
			}
		})
	}
}
