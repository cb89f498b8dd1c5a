package celenv_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/celenv/internal/celtest"
)

// auditAnnotations are evaluated after the generate entries, as Kyverno
// evaluates them into its report's properties: a string kept unless empty,
// null giving none, anything else the trigger's error naming the field.
func TestAuditAnnotationsEvaluateToStrings(t *testing.T) {
	policy := celtest.ExprPolicy(`"x"`)
	policy.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{
		{Key: "owner", ValueExpression: `"team-" + object.metadata.name`},
		{Key: "empty", ValueExpression: `""`},
		{Key: "none", ValueExpression: `null`},
	}
	in := celenv.Input{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team"}}}
	prog := celenv.Compile(policy)
	if err := prog.Err(); err != nil {
		t.Fatal(err)
	}
	res, err := prog.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"owner": "team-team"}, res.AuditAnnotations); diff != "" {
		t.Errorf("audit annotations (-want +got):\n%s", diff)
	}

	policy.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "n", ValueExpression: `1`}}
	_, err = celenv.Compile(policy).Evaluate(context.Background(), in)
	if err == nil || !strings.Contains(err.Error(), "spec.auditAnnotations[0].valueExpression") {
		t.Errorf("an annotation giving an int: error %v, want one naming spec.auditAnnotations[0].valueExpression", err)
	}
	policy.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "a", ValueExpression: `"1"`}, {Key: "a", ValueExpression: `"2"`}}
	if err := celenv.Compile(policy).Err(); err == nil || !strings.Contains(err.Error(), "spec.auditAnnotations[1].key") {
		t.Errorf("a duplicate key: error %v, want one naming spec.auditAnnotations[1].key", err)
	}
}
