package offline

import (
	"context"
	"path/filepath"
	"testing"
)

// TestFindTestsRunsTheFixtures: every fixture folder is found as one case,
// and each passes with one row.
func TestFindTestsRunsTheFixtures(t *testing.T) {
	root := filepath.Join("..", "..", "..", "..", "fixtures")
	cases, err := FindTests(root)
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
