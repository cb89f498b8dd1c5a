package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/reconcile/evaluate"
	"github.com/sprout-gitops/sprout/sources"
)

// renderOptions configure `sprout render`.
type renderOptions struct {
	policies  []string
	resources []string
	objects   []string
	// exceptions and exception are --exceptions and Kyverno's spelling,
	// --exception: files of PolicyExceptions.
	exceptions              []string
	exception               []string
	exceptionsWithResources bool
	operation               string
	output                  string
}

func newRenderCommand() *cobra.Command {
	o := renderOptions{}
	cmd := &cobra.Command{
		Use:   "render -p POLICY -r TRIGGER [--context-objects OBJECTS] [-e EXCEPTIONS]",
		Short: "Print what policies would generate for trigger objects, offline",
		Long: `Evaluate policies against trigger objects from files, without a cluster, and print
every object they would generate, with the labels Sprout would set. resource.Get and
resource.List read the --context-objects objects (and the triggers); Kyverno's CLI
Context and ClusterResource files there stand for the objects they hold, and a
ClusterResource's CRDs say which custom kinds are cluster-scoped. Files may hold several
YAML documents; a folder is read recursively (*.yaml, *.yml, *.json) as Sprout
reads a policy folder: hidden folders skipped, and a link, pipe or device among
those files is an error.

PolicyExceptions apply as the controller applies them: those among the policy
files (as a Git or folder source carries them), those of --exceptions, and,
with --exceptions-with-resources, those among the triggers. A trigger an
exception skips generates nothing and is named on standard error.
GlobalContextEntries among the triggers and context objects serve
globalContext.Get: a kubernetesResource entry holds the objects given of its
resource; an apiCall entry is not called, and reading it is an error.

The last line, on standard error, counts the policies, triggers, objects and
errors; on a terminal, standard error also shows how far render has got. Exits non-zero, naming the policy and field path, when a policy is
invalid or an evaluation fails: run it in CI on every pull request that
changes a policy.`,
		Example: `  sprout render -p policy.yaml -r namespace.yaml
  sprout render -p policies/ -r triggers/ --context-objects secrets.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("context") {
				// Every other command reads --context as the kubeconfig's.
				return errors.New("--context names a kubeconfig context, which render does not read: give objects for resource.Get and resource.List with --context-objects")
			}
			return runRender(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.policies, "policy", "p", nil, "policy files or folders (repeat or separate with commas)")
	f.StringSliceVarP(&o.resources, "resource", "r", nil, "trigger object files or folders")
	f.StringSliceVar(&o.objects, "context-objects", nil, "files or folders of objects that resource.Get and resource.List can read")
	f.StringSliceVarP(&o.exceptions, "exceptions", "e", nil, "files or folders of PolicyExceptions to apply")
	f.StringSliceVar(&o.exception, "exception", nil, "Kyverno's name for --exceptions")
	f.BoolVar(&o.exceptionsWithResources, "exceptions-with-resources", false, "take the PolicyExceptions among the -r files as exceptions, not triggers (as Kyverno's CLI)")
	f.StringVar(&o.operation, "operation", "CREATE", "the admission operation the triggers are replayed as: CREATE, UPDATE or DELETE")
	f.StringVarP(&o.output, "output", "o", "yaml", "output format: yaml or json")
	_ = cmd.MarkFlagRequired("policy")
	_ = cmd.MarkFlagRequired("resource")
	return cmd
}

func runRender(ctx context.Context, out, errOut io.Writer, o renderOptions) error {
	op := admission.Operation(strings.ToUpper(o.operation))
	if op != admission.Create && op != admission.Update && op != admission.Delete {
		return fmt.Errorf("--operation: %q is not CREATE, UPDATE or DELETE", o.operation)
	}
	if o.output != "yaml" && o.output != "json" {
		return fmt.Errorf("--output: %q is neither yaml nor json", o.output)
	}
	policies, exceptions, err := readPolicies(o.policies)
	if err != nil {
		return err
	}
	in, err := renderInputs(o, exceptions)
	if err != nil {
		return err
	}
	pr := newProgress(errOut)
	show := renderProgress(pr, policies)
	var skipped []string
	objs, err := render(ctx, policies, in, op, func(e evaluation) {
		show(e)
		if len(e.excepted) > 0 {
			skipped = append(skipped, describeExcepted(e))
		}
	})
	pr.done()
	if perr := printObjects(out, objs, o.output); perr != nil {
		return perr
	}
	for _, s := range skipped {
		fmt.Fprintln(errOut, "render: "+s)
	}
	line := summary("render", len(policies), len(in.triggers), len(objs), countErrors(err))
	if len(skipped) > 0 {
		line += fmt.Sprintf(", %s skipped by PolicyExceptions", plural(len(skipped), "evaluation", "evaluations"))
	}
	fmt.Fprintln(errOut, line)
	return err
}

// renderProgress returns what render calls after each evaluation: it shows
// which policy render has reached and how many objects it has so far.
func renderProgress(pr *progress, policies []apiv1.Policy) func(evaluation) {
	index := make(map[apiv1.Policy]int, len(policies))
	for i, p := range policies {
		index[p] = i + 1
	}
	objects := 0
	return func(e evaluation) {
		objects += len(e.objects)
		pr.set("render: policy %d of %d, objects: %d", index[e.policy], len(policies), objects)
	}
}

// summary is the last line render and diff print: what they read and found.
func summary(verb string, policies, triggers, objects, errs int) string {
	return fmt.Sprintf("%s: %s, %s, %s, %s", verb, plural(policies, "policy", "policies"),
		plural(triggers, "trigger", "triggers"), plural(objects, "object", "objects"), plural(errs, "error", "errors"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// countErrors counts the errors errors.Join joined into err.
func countErrors(err error) int {
	if err == nil {
		return 0
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		n := 0
		for _, e := range j.Unwrap() {
			n += countErrors(e)
		}
		return n
	}
	return 1
}

// render evaluates every policy against every trigger it matches. It stops
// at nothing: every invalid policy and failed evaluation is reported.
// seen, when not nil, is called after each evaluation.
func render(ctx context.Context, policies []apiv1.Policy, in offlineInputs, op admission.Operation,
	seen func(evaluation)) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	var errs []error
	err := evaluateAll(ctx, policies, in, op, func(e evaluation) {
		if seen != nil {
			seen(e)
		}
		if e.err != nil {
			errs = append(errs, e.err)
			return
		}
		out = append(out, e.objects...)
	})
	return out, errors.Join(append([]error{err}, errs...)...)
}

// evaluation is one policy's outcome for one trigger it matches, or for no
// trigger when the policy does not compile.
type evaluation struct {
	policy  apiv1.Policy
	trigger *unstructured.Unstructured // nil when the policy does not compile
	objects []*unstructured.Unstructured
	// skipped is set when a matchCondition is false: the policy skips the
	// trigger, as admission would.
	skipped bool
	// excepted names the PolicyExceptions that skipped the trigger, and
	// exceptedResult is how it is reported: skip or pass.
	excepted       []string
	exceptedResult string
	err            error
}

// evaluateAll calls fn for every policy that does not compile and for every
// policy and trigger it matches, in order; a trigger a policy does not match
// is not reported.
func evaluateAll(ctx context.Context, policies []apiv1.Policy, in offlineInputs, op admission.Operation, fn func(evaluation)) error {
	all := append(append([]*unstructured.Unstructured{}, in.objects...), in.triggers...)
	namespaces, err := namespaceLister(all, in.namespaces)
	if err != nil {
		return err
	}
	matcher := evaluate.NewMatcher(namespaces, nil)
	env := offlineEnv{namespaces: namespaces, reader: celenv.NewObjectReader(all), globalContext: in.globalContext, scopes: in.scopes}
	if env.scopes == nil {
		env.scopes = celenv.BuiltinScopes{}
	}
	for _, p := range policies {
		prog := celenv.Compile(p)
		if err := prog.Err(); err != nil {
			fn(evaluation{policy: p, err: err})
			continue
		}
		env.exceptions = in.exceptionsFor(p)
		mr := p.PolicySpec().MatchConstraints
		for _, t := range in.triggers {
			if p.IsNamespaced() && t.GetNamespace() != p.GetNamespace() {
				continue
			}
			gvr, _ := meta.UnsafeGuessKindToResource(t.GroupVersionKind())
			ok, err := matcher.Matches(*mr, false, gvr, op, t)
			if err != nil {
				fn(evaluation{policy: p, trigger: t, err: fmt.Errorf("%s: trigger %s %s: match: %w", prog.Policy(), t.GetKind(), t.GetName(), err)})
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
	op admission.Operation, env offlineEnv) evaluation {
	e := evaluation{policy: p, trigger: t}
	event := celenv.Event{Operation: string(op), Object: t, Resource: gvr}
	if t.GetNamespace() != "" {
		event.Namespace, _ = env.namespaces.Get(t.GetNamespace()) // every one is listed
	}
	in, err := celenv.NewInput(event)
	if err != nil {
		e.err = fmt.Errorf("%s: trigger %s %s: namespaceObject: %w", prog.Policy(), t.GetKind(), t.GetName(), err)
		return e
	}
	in.Scopes, in.Reader, in.GlobalContext, in.Exceptions = env.scopes, env.reader, env.globalContext, env.exceptions
	res, err := prog.Evaluate(ctx, in)
	if err != nil {
		e.err = fmt.Errorf("%s: trigger %s %s: %w", prog.Policy(), t.GetKind(), t.GetName(), err)
		return e
	}
	if len(res.Excepted) > 0 {
		e.excepted, e.exceptedResult = res.Excepted, res.ExceptedResult
		return e
	}
	e.skipped = !res.Matched
	if len(res.MissingSources) > 0 {
		// The controller prunes for a deleted source; offline it is
		// almost always a missing --context-objects file.
		e.err = fmt.Errorf("%s: trigger %s %s: clone sources not found (give them with --context-objects): %s",
			prog.Policy(), t.GetKind(), t.GetName(), strings.Join(res.MissingSources, ", "))
		return e
	}
	e.objects = evaluate.Label(p, t, res.Objects)
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

// readPolicies decodes every policy in the files and folders named, read
// as a policy folder is (sources.ReadFiles), and the PolicyExceptions among
// them, compiled, as a folder source carries them.
func readPolicies(paths []string) ([]apiv1.Policy, []sources.Exception, error) {
	var out []apiv1.Policy
	var exceptions []sources.Exception
	err := eachFile(paths, sources.PolicyLimits, func(path string, data []byte) error {
		ps, es, err := apiv1.DecodeWithExceptions(data)
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

// readObjects reads every object in the files and folders named.
func readObjects(paths []string) ([]*unstructured.Unstructured, error) {
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

// printObjects writes objs as YAML documents or as a JSON List.
func printObjects(w io.Writer, objs []*unstructured.Unstructured, format string) error {
	if format == "json" {
		items := make([]any, 0, len(objs))
		for _, o := range objs {
			items = append(items, o.Object)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	}
	for i, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}
