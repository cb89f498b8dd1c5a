package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
)

// kyvernoTestFile is the file name `kyverno test` looks for.
const kyvernoTestFile = "kyverno-test.yaml"

// errTestsFailed ends `sprout test` with exit status 1 once the table has
// said which cases failed.
var errTestsFailed = errors.New("some tests failed")

// testRow is one line of the result table.
type testRow struct {
	Case     string
	Policy   string
	Resource string
	Want     string
	Got      string
	Pass     bool
	// Detail explains a failure: a diff, or the error that was not expected.
	Detail string
}

// testCase is one folder of tests: a kyverno-test.yaml or a fixture.
type testCase struct {
	name string
	run  func(ctx context.Context) []testRow
}

func newTestCommand() *cobra.Command {
	return &cobra.Command{
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
  checks cannot run and fail the test.
- a fixture folder: policy.yaml (or a policies/ folder), triggers.yaml,
  optionally context.yaml and exceptions.yaml (PolicyExceptions), and
  expected.yaml (every object render prints, labels included) or error.txt
  (lines the error must contain).`,
		Example: `  sprout test fixtures/
  sprout test policies/tests/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var cases []testCase
			for _, dir := range args {
				found, err := findTests(dir)
				if err != nil {
					return err
				}
				if len(found) == 0 {
					return fmt.Errorf("%s: no %s and no fixture folder (policy.yaml or policies/, triggers.yaml, expected.yaml or error.txt)", dir, kyvernoTestFile)
				}
				cases = append(cases, found...)
			}
			var rows []testRow
			for _, c := range cases {
				rows = append(rows, c.run(cmd.Context())...)
			}
			return printTestRows(cmd.OutOrStdout(), rows)
		},
	}
}

// findTests walks dir for kyverno-test.yaml files and fixture folders, in
// lexical order, skipping hidden folders.
func findTests(dir string) ([]testCase, error) {
	var cases []testCase
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if isFile(filepath.Join(path, kyvernoTestFile)) {
			cases = append(cases, kyvernoCase(path))
		} else if c, ok := fixtureCase(path); ok {
			cases = append(cases, c)
		}
		return nil
	})
	return cases, err
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// fixtureCase reads a folder laid out as fixtures/README.md describes.
func fixtureCase(dir string) (testCase, bool) {
	policies := filepath.Join(dir, "policy.yaml")
	if !isFile(policies) {
		policies = filepath.Join(dir, "policies")
		if st, err := os.Stat(policies); err != nil || !st.IsDir() {
			return testCase{}, false
		}
	}
	triggers := filepath.Join(dir, "triggers.yaml")
	expected, errText := filepath.Join(dir, "expected.yaml"), filepath.Join(dir, "error.txt")
	if !isFile(triggers) || (!isFile(expected) && !isFile(errText)) {
		return testCase{}, false
	}
	o := renderOptions{policies: []string{policies}, resources: []string{triggers}}
	if c := filepath.Join(dir, "context.yaml"); isFile(c) {
		o.objects = []string{c}
	}
	if e := filepath.Join(dir, "exceptions.yaml"); isFile(e) {
		o.exceptions = []string{e}
	}
	return testCase{name: dir, run: func(ctx context.Context) []testRow {
		row := testRow{Case: dir, Policy: "*", Resource: "*", Want: "expected.yaml"}
		if isFile(errText) {
			row.Want = "error"
		}
		row.Got, row.Detail = runFixture(ctx, o, expected, errText)
		row.Pass = row.Detail == ""
		return []testRow{row}
	}}, true
}

// runFixture renders a fixture and says what it found ("expected.yaml",
// "error" or "objects") and, when that is not what the fixture wants, why.
func runFixture(ctx context.Context, o renderOptions, expected, errText string) (string, string) {
	ps, exceptions, err := readPolicies(o.policies)
	if err != nil {
		return "error", err.Error()
	}
	in, err := renderInputs(o, exceptions)
	if err != nil {
		return "error", err.Error()
	}
	objs, renderErr := render(ctx, ps, in, admission.Create, nil)
	if want, err := os.ReadFile(errText); err == nil {
		if renderErr == nil {
			return "objects", "rendered without error; error.txt wants one"
		}
		for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
			if !strings.Contains(renderErr.Error(), line) {
				return "error", fmt.Sprintf("the error does not contain %q: %v", line, renderErr)
			}
		}
		return "error", ""
	}
	if renderErr != nil {
		return "error", renderErr.Error()
	}
	want, err := readObjects([]string{expected})
	if err != nil {
		return "error", err.Error()
	}
	if d := compareObjects(want, objs, false); d != "" {
		return "objects", d
	}
	return "expected.yaml", ""
}

// printTestRows writes the table, the details of each failure and a count,
// and returns errTestsFailed when a row failed.
func printTestRows(out io.Writer, rows []testRow) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tPOLICY\tRESOURCE\tWANT\tGOT\tRESULT")
	failed := 0
	for _, r := range rows {
		result := "PASS"
		if !r.Pass {
			result = "FAIL"
			failed++
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
	fmt.Fprintf(out, "\n%s, %d passing, %d failing\n", plural(len(rows), "test", "tests"), len(rows)-failed, failed)
	if failed > 0 {
		return errTestsFailed
	}
	return nil
}

// testObjectID names an object as diff does: Kind/[namespace/]name.
func testObjectID(o *unstructured.Unstructured) string {
	id := o.GetAPIVersion() + " " + o.GetKind() + "/"
	if ns := o.GetNamespace(); ns != "" {
		id += ns + "/"
	}
	return id + o.GetName()
}

func sortedIDs(m map[string]*unstructured.Unstructured) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
