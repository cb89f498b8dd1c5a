package reconcile_test

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/reconcile"
)

// readyOf returns a policy's Ready condition from Sprout's status.conditions
// or, under Kyverno's CRDs (SPROUT_TEST_CRDS=kyverno), which drop that
// field, from status.conditionStatus, where Sprout writes it too.
func readyOf(p apiv1.Policy) *metav1.Condition {
	s := p.PolicyStatus()
	if c := meta.FindStatusCondition(s.Conditions, reconcile.ConditionReady); c != nil {
		return c
	}
	return meta.FindStatusCondition(s.ConditionStatus.Conditions, reconcile.ConditionReady)
}

// onlySproutCRDs skips a test under Kyverno's CRDs, which drop what it
// reads (why): it runs under Sprout's.
func onlySproutCRDs(t *testing.T, why string) {
	t.Helper()
	if kyvernoCRDs(t) {
		t.Skipf("Kyverno's CRDs drop %s", why)
	}
}

// The two CRD sets differ only in what they keep of a policy: its spec is
// stored alike under both (TestPolicyStoredAlikeUnderEitherCRDSet and
// TestFixturePoliciesStoredAlike prove it), its status and printer columns
// are not. So under Kyverno's CRDs a test's outcome can differ only if it
// reads a policy's status or columns, or branches on the set itself; and
// it can do so only through these names, in its own code or in a function
// of this package it calls (docs/decisions.md, #45).
var (
	// crdDependentNames: a policy's decoded status, and the set itself.
	crdDependentNames = []string{"PolicyStatus", "kyvernoCRDs", "CRDsFromEnv"}
	// crdDependentLiterals: a field path into a status (unstructured),
	// and the table kubectl get prints from the columns.
	crdDependentLiterals = []string{`"status"`, "as=Table"}
)

// onlyCRDDependentTests, under Kyverno's CRDs and unless the run names its
// tests (-run, -skip), skips the tests whose outcome cannot depend on the
// CRD set: they ran under Sprout's already, to the same outcome.
func onlyCRDDependentTests() error {
	set, err := controlplane.CRDsFromEnv()
	if err != nil || set != controlplane.KyvernoCRDs {
		return err
	}
	flag.Parse()
	named := false
	flag.Visit(func(f *flag.Flag) { named = named || f.Name == "test.run" || f.Name == "test.skip" })
	if named {
		return nil
	}
	dependent, independent, err := crdDependentTests(".")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "under Kyverno's CRDs: the %d tests that read a policy's status or columns; %d others skipped\n",
		len(dependent), len(independent))
	if len(independent) == 0 {
		return nil
	}
	return flag.Set("test.skip", "^("+strings.Join(independent, "|")+")$")
}

// crdDependentTests sorts the tests of the package in dir into those that
// reach one of crdDependentNames or crdDependentLiterals, directly or
// through the package's functions and methods (by name: a method is any
// of that name, which errs towards running a test), and the others.
func crdDependentTests(dir string) (dependent, independent []string, err error) {
	refs, tests, err := testRefs(dir)
	if err != nil {
		return nil, nil, err
	}
	reaches := map[string]bool{}
	for name, names := range refs {
		reaches[name] = slices.ContainsFunc(crdDependentNames, func(n string) bool { return names[n] }) ||
			slices.ContainsFunc(crdDependentLiterals, func(l string) bool {
				for n := range names {
					if strings.HasPrefix(n, `"`) && strings.Contains(n, l) {
						return true
					}
				}
				return false
			})
	}
	// Spread reaches from callee to caller until nothing changes.
	for changed := true; changed; {
		changed = false
		for name, names := range refs {
			for n := range names {
				if !reaches[name] && reaches[n] {
					reaches[name], changed = true, true
				}
			}
		}
	}
	for _, test := range tests {
		if reaches[test] {
			dependent = append(dependent, test)
		} else {
			independent = append(independent, test)
		}
	}
	return dependent, independent, nil
}

// testRefs returns, for each function, method and variable declared in the
// package's test files, the identifiers and string literals its
// declaration holds, and the names of the package's tests, sorted.
func testRefs(dir string) (map[string]map[string]bool, []string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	refs := map[string]map[string]bool{}
	var tests []string
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				addRefs(refs, d.Name.Name, d)
				if d.Recv == nil && strings.HasPrefix(d.Name.Name, "Test") && d.Name.Name != "TestMain" {
					tests = append(tests, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if v, ok := spec.(*ast.ValueSpec); ok {
						for _, n := range v.Names {
							addRefs(refs, n.Name, v)
						}
					}
				}
			}
		}
	}
	slices.Sort(tests)
	return refs, tests, nil
}

// addRefs adds what node names to refs[name].
func addRefs(refs map[string]map[string]bool, name string, node ast.Node) {
	names := refs[name]
	if names == nil {
		names = map[string]bool{}
		refs[name] = names
	}
	ast.Inspect(node, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			names[n.Name] = true
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				names[n.Value] = true
			}
		}
		return true
	})
}

// TestTestsThatReadPolicyStatusRunUnderBothCRDSets: a test that reads a
// policy's status (unstructured or decoded), its columns or the CRD set,
// through a function, method or variable of its package, is found to
// depend on the CRD set (testdata/crdset); one that only generates is
// not. In this package, the thousand-policy lifecycle test is not.
func TestTestsThatReadPolicyStatusRunUnderBothCRDSets(t *testing.T) {
	dependent, independent, err := crdDependentTests("testdata/crdset")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"TestAsksWhichSetRuns", "TestReadsADecodedStatus", "TestReadsAStatusField", "TestReadsTheColumns"}
	if !slices.Equal(dependent, want) || !slices.Equal(independent, []string{"TestGeneratesOnly"}) {
		t.Errorf("depend on the CRD set: %v, do not: %v; want %v and [TestGeneratesOnly]", dependent, independent, want)
	}
	dependent, independent, err = crdDependentTests(".")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(dependent, "TestStatusWritesCoalesce") || !slices.Contains(independent, "TestNoPolicyStateOutlivesItsPolicy") {
		t.Errorf("in reconcile, TestStatusWritesCoalesce reads a policy's Ready condition and TestNoPolicyStateOutlivesItsPolicy no status; found %v depend on the CRD set", dependent)
	}
}
