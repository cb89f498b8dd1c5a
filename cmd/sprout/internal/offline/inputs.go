package offline

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/globalctx"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/sources"
)

// Inputs are what an offline evaluation (render, test) reads beside
// the policies.
type Inputs struct {
	// Triggers are the objects the policies are evaluated for.
	Triggers []*unstructured.Unstructured
	// Objects are what resource.Get and resource.List read, with the
	// triggers.
	Objects []*unstructured.Unstructured
	// Exceptions are the PolicyExceptions, each compiled; those that name a
	// policy apply to it as the controller applies them.
	Exceptions []sources.Exception
	// GlobalContext serves GlobalContext.Get; nil finds no entry.
	GlobalContext celenv.GlobalContext
	// Namespaces, when set, are the Namespaces of the triggers, as a
	// kyverno-test.yaml's values give them: they take the place of those
	// among the objects and triggers.
	Namespaces []*corev1.Namespace
	// Scopes, when set, tells namespaced kinds from cluster-scoped ones
	// (with the CustomResourceDefinitions given); else BuiltinScopes.
	Scopes celenv.Scopes
}

// exceptionsFor selects the exceptions that name p and have not expired,
// as the controller does.
func (in Inputs) exceptionsFor(p apiv1.Policy) []*celenv.Exception {
	applying, _ := sources.Applying(in.Exceptions, p, time.Now())
	return applying
}

// ReadExceptions reads the PolicyExceptions of the files and folders
// named (--exceptions, a kyverno-test.yaml's exceptions). Kyverno's
// kyverno.io exceptions, for its ClusterPolicies, name no generating
// policy and are passed over, so that one file serves both; any other kind
// is an error naming its file: policies go with -p.
func ReadExceptions(paths []string) ([]sources.Exception, error) {
	var out []sources.Exception
	err := eachFile(paths, sources.PolicyLimits, func(path string, data []byte) error {
		objs, err := manifest.Parse(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, o := range objs {
			switch {
			case o.GetKind() == apiv1.PolicyExceptionKind && o.GroupVersionKind().Group == "kyverno.io":
				continue
			case !isException(o):
				return fmt.Errorf("%s: %s %s is not a PolicyException: give policies with -p", path, o.GetKind(), o.GetName())
			}
			e, err := compileException(path, o)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// isException reports whether o is a CEL PolicyException
// (policies.kyverno.io), the kind that names generating policies.
func isException(o *unstructured.Unstructured) bool {
	return o.GetKind() == apiv1.PolicyExceptionKind && o.GroupVersionKind().Group == apiv1.Group
}

// compileException decodes and compiles the exception o, read from
// source. One that does not compile fails the triggers of the policies it
// names, as in the controller, rather than letting them generate.
func compileException(source string, o *unstructured.Unstructured) (sources.Exception, error) {
	e, err := apiv1.ExceptionFromUnstructured(o)
	if err != nil {
		return sources.Exception{}, err
	}
	return sources.CompileException(e, source), nil
}

// takeExceptions removes the PolicyExceptions from objs and returns them
// compiled (--exceptions-with-resources, as Kyverno's CLI takes them from
// its resources).
func takeExceptions(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, []sources.Exception, error) {
	var rest []*unstructured.Unstructured
	var out []sources.Exception
	for _, o := range objs {
		if !isException(o) {
			rest = append(rest, o)
			continue
		}
		e, err := compileException("resources", o)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, e)
	}
	return rest, out, nil
}

// takeEntries removes Kyverno's GlobalContextEntries (kyverno.io, any of
// the versions Kyverno serves: one shape) from objs and returns them.
func takeEntries(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, []*v2beta1.GlobalContextEntry, error) {
	var rest []*unstructured.Unstructured
	var out []*v2beta1.GlobalContextEntry
	for _, o := range objs {
		if o.GetKind() != v2beta1.Kind || o.GroupVersionKind().Group != v2beta1.GroupVersion.Group {
			rest = append(rest, o)
			continue
		}
		gce := &v2beta1.GlobalContextEntry{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, gce, true); err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", v2beta1.Kind, o.GetName(), err)
		}
		out = append(out, gce)
	}
	return rest, out, nil
}

// staticEntries serves entries from the objects given instead of the
// cluster's (globalctx.Static), nil when there are none.
func staticEntries(entries []*v2beta1.GlobalContextEntry, objs []*unstructured.Unstructured) (celenv.GlobalContext, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	s := globalctx.NewStatic()
	for _, gce := range entries {
		if err := s.AddEntry(gce, objs); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Files names what render and a fixture evaluate besides the policies.
type Files struct {
	// Resources are the triggers; Objects what resource.Get and
	// resource.List read; Exceptions hold PolicyExceptions.
	Resources, Objects, Exceptions []string
	// ExceptionsWithResources takes the PolicyExceptions among the
	// triggers, as Kyverno's CLI takes them from its resources.
	ExceptionsWithResources bool
}

// ReadInputs reads what render evaluates besides the policies: the
// triggers and context objects, without the GlobalContextEntries among them
// (served from those objects), the exceptions of the policy files and of
// --exceptions, and with --exceptions-with-resources those of the triggers.
func ReadInputs(o Files, policyExceptions []sources.Exception) (Inputs, error) {
	in := Inputs{Exceptions: policyExceptions}
	triggers, err := ReadObjects(o.Resources)
	if err != nil {
		return in, err
	}
	// Kyverno's CLI gives objects to read in a Context or ClusterResource:
	// unwrapped, so that a test's files serve render as they are.
	objects, scopes, err := readContextObjects(o.Objects, "")
	if err != nil {
		return in, err
	}
	if len(scopes) > 0 {
		in.Scopes = scopes
	}
	given, err := ReadExceptions(o.Exceptions)
	if err != nil {
		return in, err
	}
	in.Exceptions = append(in.Exceptions, given...)
	if o.ExceptionsWithResources {
		var found []sources.Exception
		if triggers, found, err = takeExceptions(triggers); err != nil {
			return in, err
		}
		in.Exceptions = append(in.Exceptions, found...)
	}
	triggers, entries, err := takeEntries(triggers)
	if err != nil {
		return in, err
	}
	objects, more, err := takeEntries(objects)
	if err != nil {
		return in, err
	}
	in.Triggers, in.Objects = triggers, objects
	in.GlobalContext, err = staticEntries(append(entries, more...), append(append([]*unstructured.Unstructured{}, objects...), triggers...))
	return in, err
}

// DescribeExcepted says which exceptions skipped a trigger of a policy,
// each as namespace/name, or name alone for one read from a file without a
// namespace.
func DescribeExcepted(e Evaluation) string {
	names := make([]string, 0, len(e.Excepted))
	for _, n := range e.Excepted {
		names = append(names, strings.TrimPrefix(n, "/"))
	}
	return fmt.Sprintf("%s skips %s: excepted by PolicyException %s (reported as %s)",
		celenv.PolicyRef(e.Policy), triggerName(e.Trigger), strings.Join(names, ", "), e.ExceptedResult)
}
