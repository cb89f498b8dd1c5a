package sources

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// labelled is a policy with the label sprout.dev/run=true.
func labelled(name string) string {
	return strings.Replace(policyNamed(name), "metadata:\n", "metadata:\n  labels: {sprout.dev/run: \"true\"}\n", 1)
}

// TestPollerSelectsPolicies: with a selector, a folder (as Git and Flux
// sources) delivers only the policies it matches; one labelled in later is
// upserted, one labelled out is released (not deleted), and an unselected broken policy
// still rejects the revision.
func TestPollerSelectsPolicies(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", labelled("a"))
	write("b", policyNamed("b"))
	src := NewDirectory(dir, time.Minute)
	src.SelectPolicies(labels.SelectorFromSet(labels.Set{"sprout.dev/run": "true"}))
	h := &recorder{}
	ctx := context.Background()
	src.poll(ctx, h)
	if len(h.upserts) != 1 || !strings.HasPrefix(h.upserts[0], "a@") || src.Status().Policies != 1 {
		t.Fatalf("first revision: upserts %v, status %+v", h.upserts, src.Status())
	}

	write("b", labelled("b"))
	write("a", policyNamed("a"))
	src.poll(ctx, h)
	if !slices.ContainsFunc(h.upserts, func(u string) bool { return strings.HasPrefix(u, "b@") }) || !slices.Equal(h.releases, []string{"a"}) || len(h.deletes) > 0 {
		t.Fatalf("relabelled: upserts %v, releases %v, deletes %v", h.upserts, h.releases, h.deletes)
	}

	write("a", strings.Replace(policyNamed("a"), "generator.Apply(", "generator.Apply((", 1))
	src.poll(ctx, h)
	if st := src.Status(); st.Err == nil || !strings.Contains(st.Err.Error(), "a.yaml") {
		t.Fatalf("an unselected broken policy must still reject the revision: %+v", st)
	}
}

// TestClusterSelectsPolicies: the cluster source lists and watches only
// the selected policies; a policy labelled out is released, one deleted
// is deleted.
func TestClusterSelectsPolicies(t *testing.T) {
	client := fluxCluster(t).Resource(apiv1.GeneratingPolicies)
	ctx := context.Background()
	for _, doc := range []string{labelled("sel-a"), policyNamed("sel-b")} {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	}
	c := NewCluster(fluxCluster(t))
	c.SelectPolicies(labels.SelectorFromSet(labels.Set{"sprout.dev/run": "true"}))
	h := &syncRecorder{}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := c.Start(cctx, h); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the cluster source to sync", c.HasSynced)
	h.mu.Lock()
	got := slices.Clone(h.r.upserts)
	h.mu.Unlock()
	if len(got) != 1 || !strings.HasPrefix(got[0], "sel-a@") {
		t.Fatalf("listed: %v, want sel-a only", got)
	}

	patch := func(name, value string) {
		t.Helper()
		if _, err := client.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"sprout.dev/run":`+value+`}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch("sel-b", `"true"`)
	patch("sel-a", "null")
	waitUntil(t, "sel-b in and sel-a out", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.ContainsFunc(h.r.upserts, func(u string) bool { return strings.HasPrefix(u, "sel-b@") }) && slices.Contains(h.r.releases, "sel-a")
	})
	if err := client.Delete(ctx, "sel-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "sel-b deleted", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.Contains(h.r.deletes, "sel-b")
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if slices.Contains(h.r.deletes, "sel-a") || slices.Contains(h.r.releases, "sel-b") {
		t.Errorf("releases %v, deletes %v: want sel-a released, sel-b deleted", h.r.releases, h.r.deletes)
	}
}
