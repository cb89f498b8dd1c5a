package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// runTestCommand runs `sprout test` in-process and returns its output and
// exit status.
func runTestCommand(t *testing.T, dirs ...string) (string, int) {
	t.Helper()
	out, _, err := execute(append([]string{"test"}, dirs...)...)
	if err != nil {
		return out, exitCode(err)
	}
	return out, 0
}

// testFails runs `sprout test dir`, which must fail (exit 1), and checks
// that its output matches every one of patterns (regular expressions).
func testFails(t *testing.T, dir string, patterns ...string) {
	t.Helper()
	out, code := runTestCommand(t, dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	outputMatches(t, out, patterns...)
}

// outputMatches checks that out matches every one of patterns (regular
// expressions).
func outputMatches(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, re := range patterns {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("the output does not match %q:\n%s", re, out)
		}
	}
}

// testPasses runs `sprout test dir`, which must pass, and checks that its
// table holds every one of lines.
func testPasses(t *testing.T, dir string, lines ...string) {
	t.Helper()
	out, code := runTestCommand(t, dir)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range lines {
		if !strings.Contains(out, want) {
			t.Errorf("the output has no %q:\n%s", want, out)
		}
	}
}

// TestSproutTestRunsTheFixtures: every fixture folder is a test, and all pass.
func TestSproutTestRunsTheFixtures(t *testing.T) {
	out, code := runTestCommand(t, "../../fixtures")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	dirs, err := filepath.Glob("../../fixtures/*/triggers.yaml")
	if err != nil || len(dirs) < 10 {
		t.Fatalf("found %d fixtures: %v", len(dirs), err)
	}
	for _, d := range dirs {
		name := filepath.Dir(d)
		if !strings.Contains(out, name+" ") {
			t.Errorf("the table has no row for %s:\n%s", name, out)
		}
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("a fixture fails:\n%s", out)
	}
}

// TestSproutTestReadsKyvernoTests: a kyverno-test.yaml runs as kyverno test
// runs it: generated objects compared with generatedResource (without the
// labels recording the trigger), a trigger the matchConditions reject is a
// skip, and a Context file's resources are what resource.Get reads.
func TestSproutTestReadsKyvernoTests(t *testing.T) {
	testPasses(t, "testdata/kyverno-test",
		"copy-pull-secret  Namespace shop      pass  pass  PASS",
		"team-settings     Namespace payments  pass  pass  PASS",
		"team-settings     Namespace scratch   skip  skip  PASS",
		"3 tests, 3 passing, 0 failing",
	)
}

// TestSproutTestFails: a fixture whose expected.yaml is wrong and a Kyverno
// result that is wrong fail, each named in the table with why, and the
// command exits 1; the cases that pass still run.
func TestSproutTestFails(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, "../../fixtures/zk-kafka-address", filepath.Join(dir, "wrong-address"))
	expected := filepath.Join(dir, "wrong-address", "expected.yaml")
	data, err := os.ReadFile(expected)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(expected, bytes.Replace(data, []byte("192.168.10.10:2181"), []byte("10.0.0.1:2181"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	copyDir(t, "../../fixtures/clone-get", filepath.Join(dir, "clone-get"))
	copyDir(t, "testdata/kyverno-test/data", filepath.Join(dir, "kyverno"))
	test := filepath.Join(dir, "kyverno", "kyverno-test.yaml")
	data, err = os.ReadFile(test)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(test, bytes.Replace(data, []byte("result: skip"), []byte("result: pass"), 1), 0o644); err != nil {
		t.Fatal(err)
	}

	out, code := runTestCommand(t, dir)
	if code != 1 {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{
		filepath.Join(dir, "wrong-address") + "  ",
		"FAIL " + filepath.Join(dir, "wrong-address"),
		"ConfigMap/team-red/zk-kafka-address differs",
		"10.0.0.1:2181",
		filepath.Join(dir, "clone-get") + " ",
		"results[1]: want pass, got skip",
		"4 tests, 2 passing, 2 failing",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output has no %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`kyverno-test.yaml +team-settings +Namespace scratch +pass +skip +FAIL`).MatchString(out) {
		t.Errorf("the table has no failing row for the Namespace scratch:\n%s", out)
	}
	if _, code := runTestCommand(t, t.TempDir()); code != 1 {
		t.Errorf("a folder without tests: exit %d, want 1", code)
	}
}

// copyDir copies the regular files of a folder.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
