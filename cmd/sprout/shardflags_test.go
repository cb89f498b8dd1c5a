package main

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// TestWatchLabelSelectorFlag: --watch-label-selector is --policy-selector
// under Flux's name: a bad one is reported under the name given, and both
// names with different selectors are refused.
func TestWatchLabelSelectorFlag(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	for _, c := range []struct {
		ro   sourceFlags
		want string
	}{
		{sourceFlags{clusterPolicies: true, watchSelector: "sharding.fluxcd.io/key in (shard1"}, `--watch-label-selector "sharding.fluxcd.io/key in (shard1"`},
		{sourceFlags{clusterPolicies: true, watchSelector: "a=b", policySelector: "a=c"}, `--policy-selector "a=c" and --watch-label-selector "a=b"`},
	} {
		if _, err := c.ro.sources(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %s", c.ro, err, c.want)
		}
	}
	same := sourceFlags{clusterPolicies: true, watchSelector: "a=b", policySelector: "a=b"}
	if _, err := same.sources(context.Background(), cfg); err != nil {
		t.Errorf("one selector under both names: %v", err)
	}
}

// TestShardOf: one selector, one shard name, the same in every replica;
// none without a selector.
func TestShardOf(t *testing.T) {
	one, two := shardOf("sharding.fluxcd.io/key=shard1"), shardOf("sharding.fluxcd.io/key=shard2")
	if one == two || len(one) != 8 || one != shardOf("sharding.fluxcd.io/key=shard1") || shardOf("") != "" {
		t.Errorf("shardOf: %q, %q, %q", one, two, shardOf(""))
	}
}
