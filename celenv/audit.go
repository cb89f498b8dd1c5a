package celenv

import (
	"context"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// compileAuditAnnotations compiles the policy's auditAnnotations, which
// Kyverno evaluates after the generate entries into its report's result
// properties. Each gives a string, or null for none.
func compileAuditAnnotations(env *cel.Env, b *budget, spec *apiv1.GeneratingPolicySpec, defined []string) ([]expression, field.ErrorList) {
	var out []expression
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, a := range spec.AuditAnnotations {
		path := field.NewPath("spec", "auditAnnotations").Index(i)
		switch {
		case a.Key == "":
			errs = append(errs, field.Required(path.Child("key"), "an audit annotation needs a key"))
		case seen[a.Key]:
			errs = append(errs, field.Duplicate(path.Child("key"), a.Key))
		}
		seen[a.Key] = true
		e, err := b.compile(env, a.Key, a.ValueExpression, path.Child("valueExpression"), nil, defined)
		errs = append(errs, err...)
		out = append(out, e)
	}
	return out, errs
}

// auditAnnotations evaluates the policy's audit annotations for a trigger
// it matched: a string is kept unless empty, null gives none, as in
// Kyverno; anything else is the trigger's error.
func (p *Program) auditAnnotations(ctx context.Context, activation map[string]any) (map[string]string, error) {
	if len(p.audit) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(p.audit))
	for _, a := range p.audit {
		v, err := a.eval(ctx, activation)
		if err != nil {
			return nil, err
		}
		switch s := v.Value().(type) {
		case string:
			if s != "" {
				out[a.name] = s
			}
		default:
			if v != types.NullValue {
				return nil, fmt.Errorf("%s: gives %s, want a string or null", a.path, v.Type().TypeName())
			}
		}
	}
	return out, nil
}
