package celenv

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// Exception is a PolicyException compiled once: the match conditions that
// except a trigger from the policies it names. It is immutable and safe for
// concurrent use.
type Exception struct {
	// Name is the exception's namespace/name.
	Name string
	// ReportResult is how an excepted trigger is reported: skip or pass.
	ReportResult string
	// Priority is the label polex.kyverno.io/priority: of the exceptions
	// that except a trigger, the first with the highest decides its
	// ReportResult, as in Kyverno.
	Priority int
	// images and allowedValues are the exception's spec.images and
	// spec.allowedValues: an exception that names either does not skip the
	// policy but lets it read them (the exceptions variable), as Kyverno's
	// fine-grained exceptions do.
	images        []string
	allowedValues []string
	conditions    []expression
	readsEvent    bool
	// readsNamespace: a condition reads namespaceObject.
	readsNamespace bool
	// err, when set, is why the exception does not compile: it fails
	// every trigger it is checked for (FailingException).
	err error
}

// FailingException stands for an exception that does not compile, err
// (CompileException's, which names it): every trigger of the policies it
// names fails with err until it is fixed, as Kyverno fails compiling those
// policies, rather than generating for triggers it may have meant to except.
func FailingException(name string, err error) *Exception {
	return &Exception{Name: name, ReportResult: "skip", err: err}
}

// ReadsEvent reports whether the exception reads oldObject or request.
func (e *Exception) ReadsEvent() bool { return e.readsEvent }

// ReadsNamespace reports whether the exception reads namespaceObject.
func (e *Exception) ReadsNamespace() bool { return e.readsNamespace }

// CompileException compiles the exception's match conditions, with the same
// bounds as a policy's. Its errors name the exception and each field path.
func CompileException(e *apiv1.PolicyException) (*Exception, error) {
	name := e.Namespace + "/" + e.Name
	out := &Exception{Name: name, ReportResult: e.Spec.ReportResult,
		images: slices.Clone(e.Spec.Images), allowedValues: slices.Clone(e.Spec.AllowedValues)}
	if out.ReportResult == "" {
		out.ReportResult = "skip"
	}
	if p, err := strconv.Atoi(e.Labels[LabelExceptionPriority]); err == nil {
		out.Priority = p
	}
	errs := e.Validate()
	cluster, _, err := environments()
	if err != nil {
		return nil, fmt.Errorf("%s %s: CEL environment: %w", apiv1.PolicyExceptionKind, name, err)
	}
	b := &budget{}
	for i, mc := range e.Spec.MatchConditions {
		path := field.NewPath("spec", "matchConditions").Index(i).Child("expression")
		expr, err := b.compile(cluster, mc.Name, mc.Expression, path, cel.BoolType, nil)
		errs = append(errs, err...)
		out.conditions = append(out.conditions, expr)
	}
	out.readsEvent, out.readsNamespace = b.reads(varOldObject, varRequest), b.reads(varNamespaceObject)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %w", apiv1.PolicyExceptionKind, name, errs.ToAggregate())
	}
	return out, nil
}

// LabelExceptionPriority orders the exceptions that except one trigger, as
// Kyverno orders them.
const LabelExceptionPriority = "polex.kyverno.io/priority"

// Keys of the exceptions variable: the images and values the matching
// exceptions allow, as Kyverno's CEL policies read them.
const (
	keyAllowedImages = "allowedImages"
	keyAllowedValues = "allowedValues"
)

// noExceptions is the exceptions variable when no exception allows
// anything: one shared value, never written, so that an evaluation no
// exception applies to allocates nothing for it.
var noExceptions = map[string]any{keyAllowedImages: []string{}, keyAllowedValues: []string{}}

// excepted checks the exceptions as Kyverno checks them, before the
// policy's own matchConditions, and sets the exceptions variable in
// activation. A matching exception that names neither images nor
// allowedValues skips the trigger: excepted returns the names of every
// matching exception and the ReportResult of the first of them with the
// highest priority above zero, or else of the first. Matching exceptions
// that all name images or allowedValues skip nothing: the policy runs, and
// exceptions.allowedImages and exceptions.allowedValues hold what they
// name, in order. A condition that fails is the trigger's error, naming the
// exception, unless an exception that skips the trigger matched before it.
func excepted(ctx context.Context, exceptions []*Exception, activation map[string]any) ([]string, string, error) {
	activation[varExceptions] = noExceptions
	var names []string
	images, values := []string{}, []string{}
	result, priority, full := "", 0, false
	for _, e := range exceptions {
		if e.err != nil {
			return nil, "", e.err
		}
		ok, err := matchAll(ctx, e.conditions, activation)
		if err != nil {
			if full {
				// Kyverno keeps an exception granted: a broken later one
				// does not take it back.
				continue
			}
			return nil, "", fmt.Errorf("%s %s: %w", apiv1.PolicyExceptionKind, e.Name, err)
		}
		if !ok {
			continue
		}
		if len(names) == 0 || e.Priority > priority {
			result = e.ReportResult
			priority = max(priority, e.Priority)
		}
		names = append(names, e.Name)
		if len(e.images) == 0 && len(e.allowedValues) == 0 {
			full = true
		}
		images = append(images, e.images...)
		values = append(values, e.allowedValues...)
	}
	if full {
		return names, result, nil
	}
	if len(names) > 0 {
		activation[varExceptions] = map[string]any{keyAllowedImages: images, keyAllowedValues: values}
	}
	return nil, "", nil
}
