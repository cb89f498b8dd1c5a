package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sprout-gitops/sprout/cmd/sprout/internal/offline"
)

// errTestsFailed ends `sprout test` with exit status 1 once the table has
// said which cases failed.
var errTestsFailed = errors.New("some tests failed")

func newTestCommand() *cobra.Command {
	fileName, failOnly, selector, gitBranch := offline.TestFile, false, "", ""
	cmd := &cobra.Command{
		Use:   "test DIR...",
		Short: "Run policy tests offline: Kyverno's kyverno-test.yaml files and fixture folders",
		Long: `Find every test below the folders given and run it offline, as sprout render
evaluates policies, then print a table of results. Exits 1 when a test fails.

Two layouts are tests:

- a folder with a kyverno-test.yaml (cli.kyverno.io/v1alpha1 Test), as
  kyverno test reads it: policies, resources (the triggers), context (a
  Context) and clusterResources (ClusterResources, whose crds give custom
  kinds their scope): objects resource.Get and resource.List read;
  variables or values, whose namespaces and namespaceSelector label the
  triggers' Namespaces; and results naming a policy, the trigger kind and
  names, the result (pass: the policy matched and evaluated; skip: it did
  not match; error: the evaluation failed; fail: an error or objects other
  than generatedResource holds) and, for pass, the generatedResource file
  holding every object generated for those triggers; cloneSourceResource
  adds objects to read. Labels and annotations that record the trigger and
  policy (generate.kyverno.io/*, sprout.dev/*, app.kubernetes.io/managed-by)
  are not compared. exceptions names files of PolicyExceptions: a trigger
  one excepts is reported as its reportResult (skip unless it says pass).
  globalContextEntries give globalContext.Get its data as Kyverno mocks it
  (data, resources or resourceFiles, then fieldPath and projections).
  checks cannot run and fail the test. The file is read strictly: a field
  a Test does not have is an error naming it. Results naming a policy of
  another kind (a ClusterPolicy, a ValidatingPolicy...) are SKIPPED, with
  why: sprout test runs generating policies only, and they do not fail the
  run. -t picks results by policy=, rule= and resource= wildcards.
- a fixture folder: policy.yaml (or a policies/ folder), triggers.yaml,
  optionally context.yaml and exceptions.yaml (PolicyExceptions), and
  expected.yaml (every object render prints, labels included) or error.txt
  (lines the error must contain).`,
		Example: `  sprout test fixtures/
  sprout test policies/tests/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := offline.ParseSelector(selector)
			if err != nil {
				return fmt.Errorf("--test-case-selector: %w", err)
			}
			if err := refuseGit(args, gitBranch); err != nil {
				return err
			}
			var cases []offline.Case
			for _, dir := range args {
				found, err := offline.FindTests(dir, fileName, sel)
				if err != nil {
					return err
				}
				if len(found) == 0 {
					return fmt.Errorf("%s: no %s and no fixture folder (policy.yaml or policies/, triggers.yaml, expected.yaml or error.txt)", dir, fileName)
				}
				cases = append(cases, found...)
			}
			var rows []offline.Row
			for _, c := range cases {
				rows = append(rows, c.Run(cmd.Context())...)
			}
			return printTestRows(cmd.OutOrStdout(), rows, failOnly)
		},
	}
	// kyverno test's flags, so that its command lines run unchanged.
	cmd.Flags().StringVarP(&fileName, "file-name", "f", fileName, "the name of the Kyverno test files to run, as kyverno test's")
	cmd.Flags().StringVarP(&selector, "test-case-selector", "t", "policy=*,rule=*,resource=*",
		"run only the results that match: policy=, rule= and resource= wildcards, separated by commas, as kyverno test's")
	cmd.Flags().StringVarP(&gitBranch, "git-branch", "b", "", "refused: sprout test reads local folders; clone the repository first")
	cmd.Flags().BoolVar(&failOnly, "fail-only", false, "list only the failing rows (the counts are of every row)")
	cmd.Flags().Bool("remove-color", false, "accepted for kyverno test's command lines: sprout test prints no colour")
	cmd.Flags().Bool("detailed-results", false, "accepted for kyverno test's command lines: every failure is printed with why")
	return cmd
}

// refuseGit refuses what kyverno test clones (a Git URL as a folder, or
// --git-branch): sprout test reads local folders only, and says how.
func refuseGit(dirs []string, branch string) error {
	if branch != "" {
		return fmt.Errorf("--git-branch %s: sprout test does not clone; run git clone --branch %s URL DIR, then sprout test DIR", branch, branch)
	}
	for _, d := range dirs {
		if isGitURL(d) {
			return fmt.Errorf("%s: a Git URL; sprout test reads local folders only: run git clone URL DIR, then sprout test DIR", d)
		}
	}
	return nil
}

// isGitURL reports whether dir is written as kyverno test's Git sources
// are (https://github.com/owner/repo/…) or as another URL, and is no
// local path.
func isGitURL(dir string) bool {
	if _, err := os.Stat(dir); err == nil {
		return false
	}
	for _, prefix := range []string{"https://", "http://", "ssh://", "git://", "git@", "file://"} {
		if strings.HasPrefix(dir, prefix) {
			return true
		}
	}
	return false
}

// printTestRows writes the table (its failing rows alone with failOnly),
// the details of each failure, each row not run and why (not with
// failOnly), and a count, and returns errTestsFailed when a row failed.
func printTestRows(out io.Writer, rows []offline.Row, failOnly bool) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tPOLICY\tRESOURCE\tWANT\tGOT\tRESULT")
	failed, notRun := 0, 0
	for _, r := range rows {
		result := "PASS"
		switch {
		case !r.Pass:
			result = "FAIL"
			failed++
		case r.NotRun != "":
			result = "SKIPPED"
			notRun++
		}
		if failOnly && r.Pass {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Case, r.Policy, r.Resource, r.Want, r.Got, result)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if !r.Pass {
			fmt.Fprintf(out, "\nFAIL %s %s %s:\n%s\n", r.Case, r.Policy, r.Resource, strings.TrimRight(r.Detail, "\n"))
		}
	}
	if notRun > 0 && !failOnly {
		fmt.Fprintln(out)
		for _, r := range rows {
			if r.NotRun != "" {
				fmt.Fprintf(out, "SKIPPED %s %s %s: %s\n", r.Case, r.Policy, r.Resource, r.NotRun)
			}
		}
	}
	count := fmt.Sprintf("%s, %d passing, %d failing", plural(len(rows), "test", "tests"), len(rows)-failed-notRun, failed)
	if notRun > 0 {
		count += fmt.Sprintf(", %d skipped (not a generating policy)", notRun)
	}
	fmt.Fprintf(out, "\n%s\n", count)
	if failed > 0 {
		return errTestsFailed
	}
	return nil
}
