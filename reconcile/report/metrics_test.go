package report

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sprout-gitops/sprout/inventory"
)

// TestForgottenPolicySeriesComeBack: a policy's series are looked up once
// and kept; Forget drops them from the page and from what is kept, so a
// policy of the same name made again counts from zero, on the page.
func TestForgottenPolicySeriesComeBack(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	changes := inventory.ChangeSet{Changes: []inventory.Change{{Action: inventory.Created}, {Action: inventory.Created}, {Action: inventory.Deleted}, {Action: inventory.Created}}}
	sync := func() {
		m.CountSync("GeneratingPolicy/p", true)
		m.ObserveSync("GeneratingPolicy/p", 0.01, "ApplyFailed", changes, nil)
	}
	sync()
	sync()
	want := `
# HELP sprout_objects_total Generated objects handled by syncs, by action: created, configured, unchanged, deleted, skipped, failed.
# TYPE sprout_objects_total counter
sprout_objects_total{action="created",policy="GeneratingPolicy/p"} 6
sprout_objects_total{action="deleted",policy="GeneratingPolicy/p"} 2
# HELP sprout_syncs_total Syncs of a policy that got past its snapshot, by mode: full (every trigger), or incremental (only the triggers changed since the last).
# TYPE sprout_syncs_total counter
sprout_syncs_total{mode="incremental",policy="GeneratingPolicy/p"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sprout_objects_total", "sprout_syncs_total"); err != nil {
		t.Fatal(err)
	}
	m.Forget("GeneratingPolicy/p")
	if n, err := testutil.GatherAndCount(reg, "sprout_objects_total", "sprout_syncs_total", "sprout_reconcile_errors_total"); err != nil || n != 0 {
		t.Fatalf("after Forget: %d series (%v), want none", n, err)
	}
	sync()
	want = strings.NewReplacer("} 6", "} 3", "} 2", "} 1").Replace(want)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sprout_objects_total", "sprout_syncs_total"); err != nil {
		t.Fatal(err)
	}
}
