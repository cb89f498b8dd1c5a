package reconcile_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/sources"
)

// TestFolderLinkIsRejectedNotFollowed: a link in a policy folder to a file
// outside it rejects the revision naming the link; what the file holds
// reaches neither the PolicySource nor an Event, and the last good revision
// keeps running (issue #25, item 5). Before, the link was followed and the
// file's first line came back in the decode error, in both.
func TestFolderLinkIsRejectedNotFollowed(t *testing.T) {
	const secret = "s3cr3t-outside-the-folder"
	base := t.TempDir()
	dir := filepath.Join(base, "policies")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(base, "credentials.yaml")
	if err := os.WriteFile(outside, []byte("apiVersion: "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(derivedPolicy("links-a", "srclinks", "out", "one", true, false)), 0o644); err != nil {
		t.Fatal(err)
	}
	src := sources.NewDirectory(dir, 100*time.Millisecond)
	name := src.Name()
	runController(t, func(o *reconcile.Options) { o.Sources = []sources.Source{src} })
	first := waitForSource(t, "the source's first revision", name, func(ps *sproutv1alpha1.PolicySource, ready *metav1.Condition) bool {
		return ps.Status.Policies == 1 && ready != nil && ready.Status == metav1.ConditionTrue
	})

	if err := os.Symlink(outside, filepath.Join(dir, "evil.yaml")); err != nil {
		t.Fatal(err)
	}
	rejected := waitForSource(t, "the rejection on the source", name, func(_ *sproutv1alpha1.PolicySource, ready *metav1.Condition) bool {
		return ready != nil && ready.Status == metav1.ConditionFalse
	})
	ready := meta.FindStatusCondition(rejected.Status.Conditions, reconcile.ConditionReady)
	if ready.Reason != reconcile.ReasonRevisionRejected || !strings.Contains(ready.Message, "evil.yaml: a symbolic link; only regular files are read") ||
		strings.Contains(ready.Message, secret) {
		t.Errorf("Ready = %s: %s", ready.Reason, ready.Message)
	}
	if rejected.Status.Revision != first.Status.Revision || rejected.Status.Policies != 1 {
		t.Errorf("the last good revision must keep running: %q, %d policies", rejected.Status.Revision, rejected.Status.Policies)
	}
	poll(t, "the RevisionRejected event", func(ctx context.Context) (bool, error) {
		return hasEvent(sourceEvents(ctx, t, name), reconcile.ReasonRevisionRejected, "evil.yaml: a symbolic link"), nil
	})
	for _, e := range sourceEvents(context.Background(), t, name) {
		if strings.Contains(e.Message, secret) {
			t.Errorf("Event %s shows the file outside: %s", e.Reason, e.Message)
		}
	}
}
