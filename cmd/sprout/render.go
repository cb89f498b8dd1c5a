package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/cmd/sprout/internal/offline"
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
	policies, exceptions, err := offline.ReadPolicies(o.policies)
	if err != nil {
		return err
	}
	in, err := offline.ReadInputs(offline.Files{
		Resources: o.resources, Objects: o.objects,
		Exceptions:              append(append([]string{}, o.exceptions...), o.exception...),
		ExceptionsWithResources: o.exceptionsWithResources,
	}, exceptions)
	if err != nil {
		return err
	}
	pr := newProgress(errOut)
	show := renderProgress(pr, policies)
	var skipped []string
	objs, err := offline.Render(ctx, policies, in, op, func(e offline.Evaluation) {
		show(e)
		if len(e.Excepted) > 0 {
			skipped = append(skipped, offline.DescribeExcepted(e))
		}
	})
	pr.done()
	if perr := printObjects(out, objs, o.output); perr != nil {
		return perr
	}
	for _, s := range skipped {
		fmt.Fprintln(errOut, "render: "+s)
	}
	line := summary("render", len(policies), len(in.Triggers), len(objs), countErrors(err))
	if len(skipped) > 0 {
		line += fmt.Sprintf(", %s skipped by PolicyExceptions", plural(len(skipped), "evaluation", "evaluations"))
	}
	fmt.Fprintln(errOut, line)
	return err
}

// renderProgress returns what render calls after each evaluation: it shows
// which policy render has reached and how many objects it has so far.
func renderProgress(pr *progress, policies []apiv1.Policy) func(offline.Evaluation) {
	index := make(map[apiv1.Policy]int, len(policies))
	for i, p := range policies {
		index[p] = i + 1
	}
	objects := 0
	return func(e offline.Evaluation) {
		objects += len(e.Objects)
		pr.set("render: policy %d of %d, objects: %d", index[e.Policy], len(policies), objects)
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
