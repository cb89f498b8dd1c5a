package deploy_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// TestChartShardsMatchOverlays: the chart with sharding.shards [shard1,
// shard2] renders what deploy/sharding builds, object by object: the main
// Deployment restricted to the policies without a shard key, and a
// Deployment and a metrics Service per shard.
func TestChartShardsMatchOverlays(t *testing.T) {
	matchesKustomize(t, mustRender(t, "sharding: {shards: [shard1, shard2]}"), buildAt(t, "sharding"), "deploy/sharding")
}

// selectors returns each Deployment's policy selector, by its name, from
// --policy-selector or --watch-label-selector; a Deployment given both is
// an error, as sprout refuses it.
func selectors(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range ofKind(objs, "Deployment") {
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		found := 0
		for _, arg := range args {
			for _, flag := range []string{"--policy-selector=", "--watch-label-selector="} {
				if v, ok := strings.CutPrefix(arg, flag); ok {
					out[o.GetName()] = v
					found++
				}
			}
		}
		if found > 1 {
			t.Errorf("Deployment %s has %d selectors: %v", o.GetName(), found, args)
		}
		if _, ok := out[o.GetName()]; !ok {
			out[o.GetName()] = ""
		}
	}
	return out
}

// TestChartShardSelectors: policySelector applies to every shard, and the
// shards' selectors together take each selected policy exactly once: a
// policy labelled for a shard the values do not name is run by none, as
// docs/sharding.md says.
func TestChartShardSelectors(t *testing.T) {
	got := selectors(t, mustRender(t, "policySelector: team=a"))
	if want := map[string]string{"sprout": "team=a"}; !maps.Equal(got, want) {
		t.Errorf("without shards: selectors %v, want %v", got, want)
	}

	got = selectors(t, mustRender(t, "policySelector: team=a\nsharding: {shards: [blue, green]}"))
	want := map[string]string{
		"sprout":       "team=a,!sharding.fluxcd.io/key",
		"sprout-blue":  "team=a,sharding.fluxcd.io/key=blue",
		"sprout-green": "team=a,sharding.fluxcd.io/key=green",
	}
	if !maps.Equal(got, want) {
		t.Fatalf("selectors %v, want %v", got, want)
	}
	for _, c := range []struct {
		policy labels.Set
		runner string
	}{
		{labels.Set{"team": "a"}, "sprout"},
		{labels.Set{"team": "a", "sharding.fluxcd.io/key": "blue"}, "sprout-blue"},
		{labels.Set{"team": "a", "sharding.fluxcd.io/key": "green"}, "sprout-green"},
		{labels.Set{"team": "a", "sharding.fluxcd.io/key": "red"}, ""},
		{labels.Set{"team": "b", "sharding.fluxcd.io/key": "blue"}, ""},
	} {
		var runners []string
		for name, s := range got {
			sel, err := labels.Parse(s)
			if err != nil {
				t.Fatalf("Deployment %s: selector %q: %v", name, s, err)
			}
			if sel.Matches(c.policy) {
				runners = append(runners, name)
			}
		}
		var only []string
		if c.runner != "" {
			only = []string{c.runner}
		}
		if !slices.Equal(runners, only) {
			t.Errorf("a policy labelled %v is run by %v, want %q alone", c.policy, runners, c.runner)
		}
	}
}

// TestChartRefusesBadShards: a shard name that cannot name a Deployment and
// a label value, or one given twice, fails the render naming the value.
func TestChartRefusesBadShards(t *testing.T) {
	for _, values := range []string{
		"sharding: {shards: [Shard_1]}",
		"sharding: {shards: [a, a]}",
		"sharding: {shards: ['']}",
		"sharding: {shard: [a]}",
	} {
		_, err := renderChart(values)
		if err == nil || !strings.Contains(err.Error(), "sharding") {
			t.Errorf("values %q: %v, want an error naming sharding", values, err)
		}
	}
}
