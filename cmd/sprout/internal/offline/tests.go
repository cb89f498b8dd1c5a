package offline

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
)

// TestFile is the file name `kyverno test` looks for unless told another.
const TestFile = "kyverno-test.yaml"

// Row is one line of the result table.
type Row struct {
	Case     string
	Policy   string
	Resource string
	Want     string
	Got      string
	Pass     bool
	// Detail explains a failure: a diff, or the error that was not expected.
	Detail string
	// NotRun says why the row was not run: its policy is of a kind Sprout
	// does not run. Such a row passes, so that a test run beside kyverno
	// test does not fail for what kyverno test checks.
	NotRun string
}

// Case is one folder of tests: a kyverno-test.yaml or a fixture.
type Case struct {
	Name string
	Run  func(ctx context.Context) []Row
}

// FindTests walks dir for Kyverno test files named testFile and fixture
// folders, in lexical order; sel picks the results of the Kyverno tests to
// run (a fixture has none to pick). Hidden folders are searched too, as kyverno
// test searches them (Kyverno keeps suites in .kyverno-tests/ folders);
// only .git is skipped, which never holds a test.
func FindTests(dir, testFile string, sel Selector) ([]Case, error) {
	var cases []Case
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != dir && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if isFile(filepath.Join(path, testFile)) {
			cases = append(cases, kyvernoCase(path, testFile, sel))
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
func fixtureCase(dir string) (Case, bool) {
	policies := filepath.Join(dir, "policy.yaml")
	if !isFile(policies) {
		policies = filepath.Join(dir, "policies")
		if st, err := os.Stat(policies); err != nil || !st.IsDir() {
			return Case{}, false
		}
	}
	triggers := filepath.Join(dir, "triggers.yaml")
	expected, errText := filepath.Join(dir, "expected.yaml"), filepath.Join(dir, "error.txt")
	if !isFile(triggers) || (!isFile(expected) && !isFile(errText)) {
		return Case{}, false
	}
	o := Files{Resources: []string{triggers}}
	if c := filepath.Join(dir, "context.yaml"); isFile(c) {
		o.Objects = []string{c}
	}
	if e := filepath.Join(dir, "exceptions.yaml"); isFile(e) {
		o.Exceptions = []string{e}
	}
	return Case{Name: dir, Run: func(ctx context.Context) []Row {
		row := Row{Case: dir, Policy: "*", Resource: "*", Want: "expected.yaml"}
		if isFile(errText) {
			row.Want = "error"
		}
		row.Got, row.Detail = runFixture(ctx, policies, o, expected, errText)
		row.Pass = row.Detail == ""
		return []Row{row}
	}}, true
}

// runFixture renders a fixture and says what it found ("expected.yaml",
// "error" or "objects") and, when that is not what the fixture wants, why.
func runFixture(ctx context.Context, policies string, o Files, expected, errText string) (string, string) {
	ps, exceptions, err := ReadPolicies([]string{policies})
	if err != nil {
		return "error", err.Error()
	}
	in, err := ReadInputs(o, exceptions)
	if err != nil {
		return "error", err.Error()
	}
	objs, renderErr := Render(ctx, ps, in, admission.Create, nil)
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
	want, err := ReadObjects([]string{expected})
	if err != nil {
		return "error", err.Error()
	}
	if d := compareObjects(want, objs, false); d != "" {
		return "objects", d
	}
	return "expected.yaml", ""
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
