package sources

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exceptionNamed is a PolicyException in namespace team naming policy a.
func exceptionNamed(name, condition string) string {
	return `apiVersion: policies.kyverno.io/v1
kind: PolicyException
metadata:
  name: ` + name + `
  namespace: team
spec:
  policyRefs:
  - {kind: GeneratingPolicy, name: a}
  matchConditions:
  - name: c
    expression: '` + condition + `'
`
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRevisionsCarryExceptions: the PolicyExceptions of a revision come
// with its policies, compiled; one that does not compile, or a name used
// twice, rejects the revision with the file, exception and field named.
func TestRevisionsCarryExceptions(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": policyNamed("a") + "---\n" + exceptionNamed("legacy", `object.metadata.name == "legacy"`)})
	got, _, err := loadFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.policies) != 1 || len(got.exceptions) != 1 || got.exceptions[0].Compiled == nil || got.exceptions[0].Name != "legacy" {
		t.Fatalf("%d policies, exceptions %+v; want a and the compiled exception legacy", len(got.policies), got.exceptions)
	}
	if _, _, err := Load(os.DirFS(dir), "."); err != nil {
		t.Errorf("Load of a folder holding an exception: %v", err)
	}

	for _, tc := range []struct{ name, file, want string }{
		{"broken", exceptionNamed("broken", `object.metadata.name ==`), "b.yaml: PolicyException team/broken: spec.matchConditions[0].expression"},
		{"twice", exceptionNamed("legacy", `true`), "b.yaml: PolicyException/team/legacy is also defined in a.yaml"},
		{"unknown field", strings.Replace(exceptionNamed("typo", `true`), "policyRefs:", "policyRef: []\n  policyRefs:", 1), `PolicyException team/typo: strict decoding error: unknown field "spec.policyRef"`},
	} {
		writeFiles(t, dir, map[string]string{"b.yaml": tc.file})
		_, _, err := loadFolder(dir)
		var rejected *RejectedError
		if !errors.As(err, &rejected) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want a rejection with %q", tc.name, err, tc.want)
		}
	}
}

// exceptionRecorder records, in order, what a source hands over.
type exceptionRecorder struct {
	recorder
	order []string
}

func (r *exceptionRecorder) Upsert(p Policy) { r.order = append(r.order, "policy "+p.GetName()) }
func (r *exceptionRecorder) Exceptions(source string, list []Exception) {
	for _, e := range list {
		r.order = append(r.order, "exception "+e.Name+" from "+e.Source)
	}
}

// TestPollerHandsExceptionsFirst: a polled source hands the exceptions of
// a revision before its policies, so no policy runs without them.
func TestPollerHandsExceptionsFirst(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": policyNamed("a") + "---\n" + exceptionNamed("legacy", `true`)})
	src := NewDirectory(dir, time.Hour)
	h := &exceptionRecorder{}
	src.poll(context.Background(), h)
	want := "exception legacy from dir:" + dir + ",policy a"
	if got := strings.Join(h.order, ","); got != want {
		t.Fatalf("handed over %q, want %q", got, want)
	}
}
