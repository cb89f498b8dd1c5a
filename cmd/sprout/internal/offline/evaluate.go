package offline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/reconcile/evaluate"
	"github.com/sprout-gitops/sprout/sources"
)

// Render evaluates every policy against every trigger it matches. It stops
// at nothing: every invalid policy and failed evaluation is reported.
// seen, when not nil, is called after each evaluation.
func Render(ctx context.Context, policies []apiv1.Policy, in Inputs, op admission.Operation,
	seen func(Evaluation)) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	var errs []error
	err := EvaluateAll(ctx, policies, in, op, func(e Evaluation) {
		if seen != nil {
			seen(e)
		}
		if e.Err != nil {
			errs = append(errs, e.Err)
			return
		}
		out = append(out, e.Objects...)
	})
	return out, errors.Join(append([]error{err}, errs...)...)
}

// Evaluation is one policy's outcome for one trigger it matches, or for no
// trigger when the policy does not compile.
type Evaluation struct {
	Policy  apiv1.Policy
	Trigger *unstructured.Unstructured // nil when the policy does not compile
	Objects []*unstructured.Unstructured
	// Skipped is set when a matchCondition is false: the policy skips the
	// trigger, as admission would.
	Skipped bool
	// Excepted names the PolicyExceptions that skipped the trigger, and
	// exceptedResult is how it is reported: skip or pass.
	Excepted       []string
	ExceptedResult string
	Err            error
}

// EvaluateAll calls fn for every policy that does not compile and for every
// policy and trigger it matches, in order; a trigger a policy does not match
// is not reported.
func EvaluateAll(ctx context.Context, policies []apiv1.Policy, in Inputs, op admission.Operation, fn func(Evaluation)) error {
	all := append(append([]*unstructured.Unstructured{}, in.Objects...), in.Triggers...)
	namespaces, err := namespaceLister(all, in.Namespaces)
	if err != nil {
		return err
	}
	matcher := evaluate.NewMatcher(namespaces, nil)
	env := offlineEnv{namespaces: namespaces, reader: celenv.NewObjectReader(all), globalContext: in.GlobalContext, scopes: in.Scopes}
	if env.scopes == nil {
		env.scopes = celenv.BuiltinScopes{}
	}
	for _, p := range policies {
		prog := celenv.Compile(p)
		if err := prog.Err(); err != nil {
			fn(Evaluation{Policy: p, Err: err})
			continue
		}
		env.exceptions = in.exceptionsFor(p)
		mr := p.PolicySpec().MatchConstraints
		for _, t := range in.Triggers {
			if p.IsNamespaced() && t.GetNamespace() != p.GetNamespace() {
				continue
			}
			gvr, _ := meta.UnsafeGuessKindToResource(t.GroupVersionKind())
			ok, err := matcher.Matches(*mr, false, gvr, op, t)
			if err != nil {
				fn(Evaluation{Policy: p, Trigger: t, Err: fmt.Errorf("%s: trigger %s %s: match: %w", prog.Policy(), t.GetKind(), t.GetName(), err)})
				continue
			}
			if ok {
				fn(evaluateOne(ctx, prog, p, t, gvr, op, env))
			}
		}
	}
	return nil
}

// offlineEnv is what an offline evaluation of one policy reads besides its
// trigger.
type offlineEnv struct {
	namespaces    listersv1.NamespaceLister
	reader        celenv.Reader
	globalContext celenv.GlobalContext
	// exceptions are those that name the policy.
	exceptions []*celenv.Exception
	scopes     celenv.Scopes
}

// evaluateOne evaluates a compiled policy for one trigger it matches.
func evaluateOne(ctx context.Context, prog *celenv.Program, p apiv1.Policy, t *unstructured.Unstructured, gvr schema.GroupVersionResource,
	op admission.Operation, env offlineEnv) Evaluation {
	e := Evaluation{Policy: p, Trigger: t}
	event := celenv.Event{Operation: string(op), Object: t, Resource: gvr}
	if t.GetNamespace() != "" {
		event.Namespace, _ = env.namespaces.Get(t.GetNamespace()) // every one is listed
	}
	in, err := celenv.NewInput(event)
	if err != nil {
		e.Err = fmt.Errorf("%s: trigger %s %s: namespaceObject: %w", prog.Policy(), t.GetKind(), t.GetName(), err)
		return e
	}
	in.Scopes, in.Reader, in.GlobalContext, in.Exceptions = env.scopes, env.reader, env.globalContext, env.exceptions
	res, err := prog.Evaluate(ctx, in)
	if err != nil {
		e.Err = fmt.Errorf("%s: trigger %s %s: %w", prog.Policy(), t.GetKind(), t.GetName(), err)
		return e
	}
	if len(res.Excepted) > 0 {
		e.Excepted, e.ExceptedResult = res.Excepted, res.ExceptedResult
		return e
	}
	e.Skipped = !res.Matched
	if len(res.MissingSources) > 0 {
		// The controller prunes for a deleted source; offline it is
		// almost always a missing --context-objects file.
		e.Err = fmt.Errorf("%s: trigger %s %s: clone sources not found (give them with --context-objects): %s",
			prog.Policy(), t.GetKind(), t.GetName(), strings.Join(res.MissingSources, ", "))
		return e
	}
	e.Objects = evaluate.Label(p, t, res.Objects)
	return e
}

// namespaceLister holds given, then the Namespaces among objs that given
// does not name, plus an empty one for every other namespace an object is
// in, so the matcher never needs a cluster.
func namespaceLister(objs []*unstructured.Unstructured, given []*corev1.Namespace) (listersv1.NamespaceLister, error) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	seen, named := map[string]bool{}, map[string]bool{}
	for _, ns := range given {
		seen[ns.Name], named[ns.Name] = true, true
		_ = indexer.Add(ns)
	}
	for _, o := range objs {
		if o.GetKind() != "Namespace" || o.GetAPIVersion() != "v1" {
			continue
		}
		if named[o.GetName()] {
			continue
		}
		ns := &corev1.Namespace{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ns); err != nil {
			return nil, fmt.Errorf("the Namespace %s: %w", o.GetName(), err)
		}
		seen[ns.Name] = true
		_ = indexer.Add(ns)
	}
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !seen[ns] {
			seen[ns] = true
			_ = indexer.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	}
	return listersv1.NewNamespaceLister(indexer), nil
}

// ReadPolicies decodes every policy in the files and folders named, read
// as a policy folder is (sources.ReadFiles), and the PolicyExceptions among
// them, compiled, as a folder source carries them.
func ReadPolicies(paths []string) ([]apiv1.Policy, []sources.Exception, error) {
	return readPolicies(paths, func(data []byte) ([]byte, error) { return data, nil })
}

// readPolicies is ReadPolicies, decoding what keep leaves of each file.
func readPolicies(paths []string, keep func(data []byte) ([]byte, error)) ([]apiv1.Policy, []sources.Exception, error) {
	var out []apiv1.Policy
	var exceptions []sources.Exception
	err := eachFile(paths, sources.PolicyLimits, func(path string, data []byte) error {
		kept, err := keep(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		ps, es, err := apiv1.DecodeWithExceptions(kept)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, ps...)
		for _, e := range es {
			exceptions = append(exceptions, sources.CompileException(e, path))
		}
		return nil
	})
	return out, exceptions, err
}

// objectLimits bound the trigger and context files render reads: looser
// than a policy revision's, since a dump of a cluster's objects is large,
// but a bound still (a link to /dev/zero in a folder).
var objectLimits = sources.Limits{FileSize: 256 << 20, TotalSize: 1 << 30, Files: 100_000}

// ReadObjects reads every object in the files and folders named.
func ReadObjects(paths []string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	err := eachFile(paths, objectLimits, func(path string, data []byte) error {
		objs, err := manifest.Parse(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, objs...)
		return nil
	})
	return out, err
}

// eachFile calls fn for each named file, and each YAML or JSON file below each
// named folder, in lexical order. Only regular files in a folder are read,
// each folder within lim, as a folder source reads one.
func eachFile(paths []string, lim sources.Limits, fn func(path string, data []byte) error) error {
	for _, root := range paths {
		files, err := sources.ReadFiles(root, []string{".yaml", ".yml", ".json"}, lim)
		if err != nil {
			return err
		}
		for _, f := range files {
			if err := fn(f.Path, f.Data); err != nil {
				return err
			}
		}
	}
	return nil
}
