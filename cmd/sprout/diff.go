package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/reconcile/blast"
	"github.com/sprout-gitops/sprout/sources"
)

// errDifferences ends `sprout diff` with exit status 1, as kubectl diff
// does when there are changes; other errors exit with 2.
var errDifferences = errors.New("differences found")

// diffOptions are the flags of `sprout diff`.
type diffOptions struct {
	sourceFlags
	output string
	// accounts holds the ServiceAccount and PolicyException flags, as
	// `sprout run` has them.
	accounts reconcile.Options
}

func newDiffCommand(g *globalFlags) *cobra.Command {
	o := diffOptions{accounts: reconcile.DefaultOptions()}
	cmd := &cobra.Command{
		Use:   "diff [POLICY...]",
		Short: "Show what policies would change in the live cluster, without writing",
		Long: `Evaluate policies from folders, a Git repository or the cluster against the live
cluster, and show what Sprout would create, change (a unified diff of the
object as it is and as a server-side apply would leave it) and prune. Nothing
is written: objects that would change are sent as server-side dry-run applies,
as kubectl diff does, and records, statuses and Events are left alone.

A policy is planned as Sprout would run it now: the triggers it has admitted
and when it was activated come from the PolicyInventory record of the policy
of that name, so a changed policy shows only what the change does.

Without --policy-dir, --git-url or --source-ref the policies stored in the cluster are
planned, which shows drift that Sprout would repair. Secret values are masked.

POLICY limits the plan to the policies named: NAME for a GeneratingPolicy,
NAMESPACE/NAME for a NamespacedGeneratingPolicy (or the GeneratingPolicy/NAME
and NamespacedGeneratingPolicy/NAMESPACE/NAME the diff prints). A name that no
source holds is an error, and no plan is printed.

On a terminal, standard error shows how far the diff has got; the last line
there counts policies, triggers, objects, errors and changes.

Exit status: 0 when nothing would change, 1 when something would, 2 on errors
(a policy that does not compile, an evaluation or a dry run that fails).`,
		Example: `  sprout diff --policy-dir ./policies
  sprout diff --git-url https://github.com/example/platform --git-branch feature --git-path policies
  sprout diff -o table
  sprout diff --policy-dir ./policies zk-kafka-address team-red/copy-settings`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			err := runDiff(cmd, g, o, args)
			switch {
			case errors.Is(err, errDifferences):
				return &exitError{code: 1, err: err}
			case err != nil:
				return &exitError{code: 2, err: err}
			}
			return nil
		},
	}
	f := cmd.Flags()
	o.register(f, "plan")
	registerAccounts(f, &o.accounts)
	registerExceptionFlags(f, &o.accounts)
	f.StringVarP(&o.output, "output", "o", "diff", "output format: diff (unified), table, yaml or json")
	f.StringVar(&o.accounts.BlastRadius, "blast-radius", "off", "the blast-radius guard's threshold `sprout run` has (--blast-radius): a new revision beyond it is shown as held")
	return cmd
}

// runDiff plans the policies the flags and arguments name and prints the plan.
func runDiff(cmd *cobra.Command, g *globalFlags, o diffOptions, names []string) error {
	if !cmd.Flags().Changed("log-level") {
		g.logLevel = "error"
	}
	pr := newProgress(cmd.ErrOrStderr())
	defer pr.done()
	log, err := g.logger(pr)
	if err != nil {
		return err
	}
	klog.SetSlogLogger(clientLogger(log))
	if o.output != "diff" && o.output != "table" && o.output != "yaml" && o.output != "json" {
		return fmt.Errorf("-o %q: want diff, table, yaml or json", o.output)
	}
	if err := reconcile.ValidateServiceAccountOptions(o.accounts); err != nil {
		return err
	}
	if err := blast.Validate(o.accounts.BlastRadius); err != nil {
		return fmt.Errorf("--blast-radius: %w", err)
	}
	filter, err := newPlanFilter(names, pr)
	if err != nil {
		return err
	}
	cfg, err := g.restConfig()
	if err != nil {
		return err
	}
	if err := reachable(cfg); err != nil {
		return err
	}
	plans, pv, err := planPolicies(cmd, cfg, o, filter, log)
	pr.done()
	if err != nil {
		return err
	}
	err = printPlans(cmd.OutOrStdout(), plans, o.output, pv)
	for _, p := range plans {
		if p.Held != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: held by the blast-radius guard: %s\n", p.Policy, p.Held)
		}
	}
	fmt.Fprintln(cmd.ErrOrStderr(), planSummary(plans))
	return err
}

// planPolicies builds diff's sources, keeps the policies filter selects and plans
// them with a dry-run controller.
func planPolicies(cmd *cobra.Command, cfg *rest.Config, o diffOptions, filter *planFilter, log *slog.Logger) ([]reconcile.PolicyPlan, *previews, error) {
	if !cmd.Flags().Changed("cluster-policies") {
		o.clusterPolicies = o.git.URL == "" && len(o.policyDirs) == 0 && len(o.fluxRefs) == 0
	}
	srcs, err := o.sources(cmd.Context(), cfg)
	if err != nil {
		return nil, nil, err
	}
	if len(srcs) == 0 {
		return nil, nil, errors.New("no policies to plan: give --policy-dir, --git-url or --source-ref, or keep --cluster-policies")
	}
	readClusterExceptions(srcs, o.accounts)
	pv, err := newPreviews(cmd.Context(), cfg)
	if err != nil {
		return nil, nil, err
	}
	wrapped := make([]sources.Source, len(srcs))
	for i, src := range srcs {
		wrapped[i] = pv.wrap(filter.wrap(src))
	}
	opts := reconcile.DefaultOptions()
	opts.DefaultServiceAccount, opts.ServiceAccountNamespaces = o.accounts.DefaultServiceAccount, o.accounts.ServiceAccountNamespaces
	opts.PolicyExceptions, opts.ExceptionNamespace = o.accounts.PolicyExceptions, o.accounts.ExceptionNamespace
	opts.BlastRadius = o.accounts.BlastRadius
	opts.DryRun, opts.Sources, opts.Logger, opts.ResyncSchedule = true, wrapped, log, ""
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	entries, err := servePlanEntries(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	opts.GlobalContext = entries
	c, err := reconcile.New(cfg, opts)
	if err != nil {
		return nil, nil, err
	}
	plans, err := c.Plan(ctx)
	if err != nil {
		return nil, nil, err
	}
	// A name no source delivered is a typo or the wrong source: planning
	// the others alone would read as "nothing changes" for it.
	if err := filter.missing(srcs); err != nil {
		return nil, nil, err
	}
	return plans, pv, nil
}

// planSummary is the last line of `sprout diff`: how many policies were
// planned, the triggers and objects they touch, what would change and how
// many policies failed.
func planSummary(plans []reconcile.PolicyPlan) string {
	triggers := map[string]bool{}
	objects, errs := 0, 0
	counts := map[inventory.Action]int{}
	for _, p := range plans {
		if p.Err != nil {
			errs++
		}
		for _, ch := range p.Changes.Changes {
			objects++
			counts[ch.Action]++
			if ch.TriggerUID != "" {
				triggers[ch.TriggerUID] = true
			}
		}
	}
	return fmt.Sprintf("%s: %d to create, %d to change, %d to delete", summary("diff", len(plans), len(triggers), objects, errs),
		counts[inventory.Created], counts[inventory.Configured], counts[inventory.Deleted])
}

// printPlans writes the plans in the asked format and returns
// errDifferences when something would change, or the policies' errors.
func printPlans(out io.Writer, plans []reconcile.PolicyPlan, format string, pv *previews) error {
	var errs []error
	changed := false
	for _, p := range plans {
		if p.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Policy, p.Err))
		}
		changed = changed || p.Changes.Written()
	}
	var err error
	switch format {
	case "diff":
		err = printUnified(out, plans, pv)
	case "table":
		err = printTable(out, plans)
	default:
		err = printStructured(out, plans, format)
	}
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if changed {
		return errDifferences
	}
	return nil
}

// printUnified writes one unified diff per object that would change.
func printUnified(out io.Writer, plans []reconcile.PolicyPlan, pv *previews) error {
	for _, p := range plans {
		if p.Held != "" {
			fmt.Fprintf(out, "# held %s: %s\n", p.Policy, p.Held)
		}
		for _, ch := range p.Changes.Changes {
			if !written(ch.Action) {
				continue
			}
			before, err := objectYAML(withoutBookkeeping(ch.Before))
			if err != nil {
				return err
			}
			after, err := objectYAML(withoutBookkeeping(ch.After))
			if err != nil {
				return err
			}
			text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: difflib.SplitLines(before), B: difflib.SplitLines(after),
				FromFile: "live/" + ch.ID, ToFile: "sprout/" + ch.ID, Context: 3,
			})
			if err != nil {
				return err
			}
			note := ""
			if pv.has(p.Policy) {
				note = ", a new policy without generateExisting: for this trigger when it is next created or changed"
			}
			fmt.Fprintf(out, "# %s %s (%s%s)\n%s", ch.Action, ch.ID, p.Policy, note, text)
		}
	}
	return nil
}

// printTable writes one row per object that would change.
func printTable(out io.Writer, plans []reconcile.PolicyPlan) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACTION\tOBJECT\tPOLICY")
	for _, p := range plans {
		for _, ch := range p.Changes.Changes {
			if written(ch.Action) {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", ch.Action, ch.ID, p.Policy)
			}
		}
	}
	return tw.Flush()
}

// plannedObject is one object of `sprout diff -o yaml|json`.
type plannedObject struct {
	Policy string         `json:"policy"`
	Action string         `json:"action"`
	Object string         `json:"object"`
	Before map[string]any `json:"before,omitempty"`
	After  map[string]any `json:"after,omitempty"`
	// Held: the blast-radius guard would hold this deletion or overwrite.
	Held bool `json:"held,omitempty"`
}

// printStructured writes the objects that would change as a YAML or JSON list.
func printStructured(out io.Writer, plans []reconcile.PolicyPlan, format string) error {
	list := []plannedObject{}
	for _, p := range plans {
		for _, ch := range p.Changes.Changes {
			if !written(ch.Action) {
				continue
			}
			o := plannedObject{Policy: p.Policy, Action: string(ch.Action), Object: ch.ID, Held: p.Held != "" && ch.Action != inventory.Created}
			if ch.Before != nil {
				o.Before = withoutBookkeeping(ch.Before).Object
			}
			if ch.After != nil {
				o.After = withoutBookkeeping(ch.After).Object
			}
			list = append(list, o)
		}
	}
	var data []byte
	var err error
	if format == "json" {
		data, err = json.MarshalIndent(list, "", "  ")
		data = append(data, '\n')
	} else {
		data, err = yaml.Marshal(list)
	}
	if err != nil {
		return err
	}
	_, err = out.Write(data)
	return err
}

func written(a inventory.Action) bool {
	return a == inventory.Created || a == inventory.Configured || a == inventory.Deleted
}

func objectYAML(obj *unstructured.Unstructured) (string, error) {
	if obj == nil {
		return "", nil
	}
	data, err := yaml.Marshal(obj.Object)
	return string(data), err
}

// withoutBookkeeping returns obj without what Sprout writes for itself
// alone: the digest of what it applied changes with every change, so it
// would show in every diff and tell the reader nothing.
func withoutBookkeeping(obj *unstructured.Unstructured) *unstructured.Unstructured {
	if obj == nil {
		return nil
	}
	a := obj.GetAnnotations()
	if _, ok := a[sproutv1alpha1.AnnotationApplied]; !ok {
		return obj
	}
	obj = obj.DeepCopy()
	delete(a, sproutv1alpha1.AnnotationApplied)
	if len(a) == 0 {
		unstructured.RemoveNestedField(obj.Object, "metadata", "annotations")
	} else {
		obj.SetAnnotations(a)
	}
	return obj
}

// exitError carries the exit status a command's failure should end with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode maps a command's error to the process's exit status: 1 unless
// the command said otherwise.
func exitCode(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return 1
}
