package reconcile_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/sources"
)

// TestDirectorySource: policies in a folder are run, followed through
// edits, kept through a broken revision, and deleted with their file.
func TestDirectorySource(t *testing.T) {
	dir := t.TempDir()
	replaceFile(t, dir, "derived.yaml", derivedPolicy("from-dir", "dirsrc", "out", "one", true, false))

	logs, _ := runController(t, func(o *reconcile.Options) {
		o.Sources = []sources.Source{sources.NewDirectory(dir, 100*time.Millisecond)}
	})

	rec := policyRecord(t, "from-dir")
	tb := newTable(t, "dirsrc")
	tb.trigger("a", "dirsrc", "a1")
	tb.waitFor("the downstream of a policy from a folder", "a-out", exists)
	if src, _, _ := unstructured.NestedString(rec.Object, "spec", "source"); src != "dir:"+dir {
		t.Errorf("record source = %q", src)
	}
	if rev, _, _ := unstructured.NestedString(rec.Object, "spec", "revision"); !strings.HasPrefix(rev, "sha256:") {
		t.Errorf("record revision = %q", rev)
	}

	replaceFile(t, dir, "derived.yaml", derivedPolicy("from-dir", "dirsrc", "out", "two", true, false))
	tb.waitFor("the edit to reach the downstream", "a-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["policy"] == "two" })

	// A revision with one broken policy is rejected whole: the good edit
	// next to it does not apply, and the last good revision keeps running.
	// The broken file goes first: a poll between the two writes must not
	// find a good revision holding the edit.
	replaceFile(t, dir, "broken.yaml", strings.Replace(derivedPolicy("broken", "dirsrc", "x", "one", true, false), "generator.Apply(", "generator.Apply((", 1))
	replaceFile(t, dir, "derived.yaml", derivedPolicy("from-dir", "dirsrc", "out", "three", true, false))
	poll(t, "the rejection in the log", func(context.Context) (bool, error) {
		return strings.Contains(logs.String(), "source revision rejected") && strings.Contains(logs.String(), "broken.yaml"), nil
	})
	if !strings.Contains(logs.String(), "spec.generate[0].expression") {
		t.Errorf("the rejection does not name the field path:\n%s", logs.String())
	}
	tb.delete("a-out")
	tb.waitFor("the last good revision to repair drift", "a-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["policy"] == "two" })

	if err := os.Remove(filepath.Join(dir, "broken.yaml")); err != nil {
		t.Fatal(err)
	}
	tb.waitFor("the fixed revision", "a-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["policy"] == "three" })

	if err := os.Remove(filepath.Join(dir, "derived.yaml")); err != nil {
		t.Fatal(err)
	}
	tb.waitFor("the downstream to go with the policy's file", "a-out", absent)
}
