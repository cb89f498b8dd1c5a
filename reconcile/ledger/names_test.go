package ledger

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/sources"
)

func copyOf(source string) sources.Policy {
	return sources.Policy{Policy: &apiv1.GeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, Source: source}
}

// The source of higher precedence holds a name whichever delivers first;
// when its copy goes, the next one takes over; a shadowed copy going
// changes nothing.
func TestNamesGoToTheSourceOfPrecedence(t *testing.T) {
	var n Names
	if !n.Claim(key, copyOf("git"), 1) {
		t.Fatal("the only copy does not hold the name")
	}
	if !n.Claim(key, copyOf("cluster"), -1) || n.Holder(key) != "cluster" {
		t.Fatal("the cluster's copy does not take the name")
	}
	if n.Claim(key, copyOf("folder"), 2) || !n.Has(key, "folder") {
		t.Fatal("a copy of lower precedence holds the name, or is not kept aside")
	}
	if count, conflicts := n.OfSource("git"); count != 1 || len(conflicts) != 1 || conflicts[0] != "GeneratingPolicy/p is also in cluster, folder; cluster runs it" {
		t.Errorf("git: %d policies, conflicts %q", count, conflicts)
	}
	if _, held, _ := n.Release(key, "folder"); held {
		t.Error("a shadowed copy going was the held one")
	}
	next, held, promoted := n.Release(key, "cluster")
	if !held || !promoted || next.Source != "git" {
		t.Errorf("the holder going: held %v, promoted %v to %q; want git", held, promoted, next.Source)
	}
	if _, held, promoted := n.Release(key, "git"); !held || promoted || n.Len() != 0 {
		t.Errorf("the last copy going: held %v, promoted %v, %d names left", held, promoted, n.Len())
	}
}
