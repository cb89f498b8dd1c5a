package sources

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
)

// programRecorder keeps the program of every policy upserted, in order.
type programRecorder struct {
	syncRecorder
	mu       sync.Mutex
	programs []*celenv.Program
}

func (r *programRecorder) Upsert(p Policy) {
	r.mu.Lock()
	r.programs = append(r.programs, p.Program)
	r.mu.Unlock()
	r.syncRecorder.Upsert(p)
}

func (r *programRecorder) upserted() []*celenv.Program {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*celenv.Program(nil), r.programs...)
}

// TestClusterCompilesEachGenerationOnce: the cluster source hands every
// policy over compiled; a change that keeps the generation (a label, as a
// status write) hands over the same program, a new generation a new one.
func TestClusterCompilesEachGenerationOnce(t *testing.T) {
	client := fluxCluster(t).Resource(apiv1.GeneratingPolicies)
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(policyNamed("compiled-once")), &u.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	h := &programRecorder{}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := NewCluster(fluxCluster(t)).Start(cctx, h); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the policy delivered", func() bool { return len(h.upserted()) == 1 })
	first := h.upserted()[0]
	if first == nil || first.Err() != nil {
		t.Fatalf("delivered without a program that compiled: %v", first)
	}

	patch := func(body string) {
		t.Helper()
		if _, err := client.Patch(ctx, "compiled-once", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"metadata":{"labels":{"a":"b"}}}`)
	waitUntil(t, "the relabelled policy delivered", func() bool { return len(h.upserted()) == 2 })
	if got := h.upserted()[1]; got != first {
		t.Error("a change that keeps the generation compiled the policy again")
	}
	patch(`{"spec":{"generate":[{"expression":"generator.Apply(object.metadata.name + \"-x\", [])"}]}}`)
	waitUntil(t, "the changed policy delivered", func() bool { return len(h.upserted()) == 3 })
	if got := h.upserted()[2]; got == first || got == nil || got.Err() != nil {
		t.Errorf("a new generation was not compiled anew: %v", got)
	}
}

// TestPollerHandsOverCompiledPolicies: a folder (as Git and Flux sources)
// hands over each policy with the program Load compiled.
func TestPollerHandsOverCompiledPolicies(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(policyNamed("a")), 0o644); err != nil {
		t.Fatal(err)
	}
	h := &programRecorder{}
	NewDirectory(dir, time.Minute).poll(context.Background(), h)
	got := h.upserted()
	if len(got) != 1 || got[0] == nil || got[0].Policy() != "GeneratingPolicy/a" {
		t.Fatalf("upserted programs %v, want the one of GeneratingPolicy/a", got)
	}
}
