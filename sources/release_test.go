package sources

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// shardedPolicy is a policy file named name in the shard shard.
func shardedPolicy(name, shard string) string {
	return strings.Replace(policyNamed(name), "  name: "+name+"\n", "  name: "+name+"\n  labels: {sharding.fluxcd.io/key: "+shard+"}\n", 1)
}

// TestSelectedFolderReleases: a folder source with a selector releases a
// policy whose file is relabelled out of it, deletes one whose file is
// removed, and says which policies it holds outside its selection.
func TestSelectedFolderReleases(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a", shardedPolicy("a", "shard1"))
	write("b", shardedPolicy("b", "shard1"))
	write("c", shardedPolicy("c", "shard2"))
	src := NewDirectory(dir, time.Hour)
	src.SelectPolicies(labels.SelectorFromSet(labels.Set{"sharding.fluxcd.io/key": "shard1"}))
	ctx := context.Background()
	r := &recorder{}
	src.poll(ctx, r)
	slices.Sort(r.upserts)
	if len(r.upserts) != 2 || !strings.HasPrefix(r.upserts[0], "a@") || !strings.HasPrefix(r.upserts[1], "b@") {
		t.Fatalf("first revision: upserts %v", r.upserts)
	}
	if !src.Unselected(ctx, apiv1.GeneratingPolicyKind, "", "c") || src.Unselected(ctx, apiv1.GeneratingPolicyKind, "", "a") ||
		src.Unselected(ctx, apiv1.GeneratingPolicyKind, "", "gone") {
		t.Error("Unselected: want c only")
	}

	write("a", shardedPolicy("a", "shard2"))
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	*r = recorder{}
	src.poll(ctx, r)
	if !slices.Equal(r.releases, []string{"a"}) || !slices.Equal(r.deletes, []string{"b"}) || len(r.failures) > 0 {
		t.Errorf("relabelled a, removed b: releases %v, deletes %v, failures %v", r.releases, r.deletes, r.failures)
	}
	if !src.Unselected(ctx, apiv1.GeneratingPolicyKind, "", "a") {
		t.Error("Unselected(a) after its relabel: want true")
	}
}
