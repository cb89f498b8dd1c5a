package offline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sprout-gitops/sprout/sources"
)

// TestFindTestsRunsTheFixtures: every fixture folder is found as one case,
// and each passes with one row.
func TestFindTestsRunsTheFixtures(t *testing.T) {
	root := filepath.Join("..", "..", "..", "..", "fixtures")
	cases, err := FindTests(root, TestFile, Selector{})
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob(filepath.Join(root, "*", "triggers.yaml"))
	if err != nil || len(dirs) < 10 {
		t.Fatalf("found %d fixtures: %v", len(dirs), err)
	}
	byName := map[string]Case{}
	for _, c := range cases {
		byName[c.Name] = c
	}
	for _, d := range dirs {
		c, ok := byName[filepath.Dir(d)]
		if !ok {
			t.Errorf("no case for %s", filepath.Dir(d))
			continue
		}
		for _, r := range c.Run(context.Background()) {
			if !r.Pass {
				t.Errorf("%s %s %s: want %s, got %s: %s", r.Case, r.Policy, r.Resource, r.Want, r.Got, r.Detail)
			}
		}
	}
}

// TestKyvernoTestFileIsBounded: a kyverno-test.yaml is read up to the 4 MiB
// a policy file may have, and no further: a larger one is the case's
// error, naming the file and the bound. It was read whole.
func TestKyvernoTestFileIsBounded(t *testing.T) {
	dir := t.TempDir()
	big := "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\n#" + strings.Repeat("x", sources.MaxFileSize) + "\n"
	if err := os.WriteFile(filepath.Join(dir, TestFile), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	rows := kyvernoCase(dir, TestFile, Selector{}).Run(context.Background())
	want := fmt.Sprintf("more than the %d a file may have", sources.MaxFileSize)
	if len(rows) != 1 || rows[0].Got != "error" || !strings.Contains(rows[0].Detail, want) || !strings.Contains(rows[0].Detail, TestFile) {
		t.Fatalf("a test file over the bound: %+v, want one error row saying %q", rows, want)
	}
}
