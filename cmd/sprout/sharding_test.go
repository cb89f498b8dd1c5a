package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/fixtures"
)

// shardKey is the label Flux shards its objects by.
const shardKey = "sharding.fluxcd.io/key"

// createShardedPolicy creates the zk-kafka-address policy as name, in shard.
func createShardedPolicy(t *testing.T, client dynamic.Interface, name, shard string) {
	t.Helper()
	policy, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(policy), "name: zk-kafka-address\n", fmt.Sprintf("name: %s\n  labels: {%s: %s}\n", name, shardKey, shard), 1)
	doc = strings.Replace(doc, `"name": "zk-kafka-address"`, `"name": "`+name+`"`, 1)
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Resource(apiv1.GeneratingPolicies).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// shardWrites are the write requests a shard made to what policies own:
// generated ConfigMaps, PolicyInventory records and policies' status.
func shardWrites(p *apiProxy) []string {
	var out []string
	for _, w := range p.written() {
		if strings.Contains(w, "configmaps") || strings.Contains(w, "policyinventories") || strings.Contains(w, "generatingpolicies") {
			out = append(out, w)
		}
	}
	return out
}

// TestTwoShards: two sprout processes, each with --leader-elect and its
// own --watch-label-selector, both lead (a Lease each) and each syncs only
// its shard's policies. A policy relabelled into the other shard is handed
// over: the first shard releases it (nothing pruned), the second adopts
// its objects and record with no write at all. A shard restarted leaves
// the other shard's records alone. No write conflicts anywhere.
func TestTwoShards(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ctx := context.Background()
	createShardedPolicy(t, dyn, "one", "shard1")
	createShardedPolicy(t, dyn, "two", "shard2")
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-red", Labels: map[string]string{"color": "red"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	leaderFlags := []string{"--leader-elect", "--leader-election-namespace", "default",
		"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "250ms"}
	proxies := map[string]*apiProxy{"shard1": newAPIProxy(t, cp.Config), "shard2": newAPIProxy(t, cp.Config)}
	kubeconfigs := map[string]string{}
	shards := map[string]*process{}
	start := func(shard string) {
		if kubeconfigs[shard] == "" {
			kubeconfigs[shard] = proxies[shard].kubeconfig(t)
		}
		shards[shard] = startProcess(t, kubeconfigs[shard], append(leaderFlags, "--watch-label-selector", shardKey+"="+shard)...)
	}
	start("shard1")
	start("shard2")
	syncs := func(ctx context.Context, shard, policy string) float64 {
		p := shards[shard]
		_, m := p.get(ctx, p.metric(), "/metrics")
		return metricSum(m, "sprout_reconcile_duration_seconds_count", `policy="GeneratingPolicy/`+policy+`"`)
	}
	configMap := func(ctx context.Context, name string) *corev1.ConfigMap {
		cm, err := kube.CoreV1().ConfigMaps("team-red").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return cm
	}
	eventually(t, "each shard to generate its policy's ConfigMap", func(ctx context.Context) bool {
		return configMap(ctx, "one") != nil && configMap(ctx, "two") != nil && syncs(ctx, "shard1", "one") >= 1 && syncs(ctx, "shard2", "two") >= 1
	})

	// Both lead, each its own Lease.
	leases, err := kube.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holders := map[string]string{}
	for _, l := range leases.Items {
		if strings.HasPrefix(l.Name, "sprout-") && l.Spec.HolderIdentity != nil {
			holders[l.Name] = *l.Spec.HolderIdentity
		}
	}
	if len(holders) != 2 || holders["sprout-"+shardOf(shardKey+"=shard1")] == "" || holders["sprout-"+shardOf(shardKey+"=shard2")] == "" {
		t.Fatalf("want one held Lease per shard, got %v", holders)
	}

	// Each policy is one shard's: only it synced it, only it wrote its
	// objects, and one field manager holds them.
	for shard, other := range map[string]string{"shard1": "two", "shard2": "one"} {
		if n := syncs(ctx, shard, other); n != 0 {
			t.Errorf("%s synced the other shard's policy %s %v times", shard, other, n)
		}
		for _, w := range proxies[shard].written() {
			if strings.Contains(w, "configmaps/"+other) || strings.Contains(w, "generatingpolicies/"+other) {
				t.Errorf("%s wrote for the other shard's policy: %s", shard, w)
			}
		}
	}
	for _, name := range []string{"one", "two"} {
		for _, mf := range configMap(ctx, name).ManagedFields {
			if mf.Manager != sproutv1alpha1.FieldManager {
				t.Errorf("ConfigMap %s has a second field manager %q", name, mf.Manager)
			}
		}
	}

	// Hand "one" over to shard2.
	before := configMap(ctx, "one")
	records := dyn.Resource(sproutv1alpha1.PolicyInventories)
	recordOf := func(ctx context.Context) string {
		list, err := records.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Items {
			if name, _, _ := unstructured.NestedString(r.Object, "spec", "policy", "name"); name == "one" {
				return r.GetName() + "@" + r.GetResourceVersion()
			}
		}
		return ""
	}
	recordBefore := recordOf(ctx)
	if recordBefore == "" {
		t.Fatal("policy one has no record")
	}
	for _, p := range proxies {
		p.reset()
	}
	if _, err := dyn.Resource(apiv1.GeneratingPolicies).Patch(ctx, "one", "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"`+shardKey+`":"shard2"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "shard1 to release policy one and shard2 to sync it", func(ctx context.Context) bool {
		return strings.Contains(shards["shard1"].logs.String(), "policy released") && syncs(ctx, "shard2", "one") >= 1
	})
	after := configMap(ctx, "one")
	if after == nil || after.UID != before.UID || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the handover touched policy one's ConfigMap: before %s@%s, after %v", before.UID, before.ResourceVersion, after)
	}
	if got := recordOf(ctx); got != recordBefore {
		t.Errorf("the handover wrote policy one's record: %s, then %s", recordBefore, got)
	}
	for shard, p := range proxies {
		if w := shardWrites(p); len(w) > 0 {
			t.Errorf("%s wrote during the handover: %v", shard, w)
		}
	}
	if n := syncs(ctx, "shard1", "one"); n != 0 {
		t.Errorf("shard1 still reports policy one's syncs: %v", n)
	}

	// The new owner works: a new Namespace gets "one" from shard2 only.
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-red-2", Labels: map[string]string{"color": "red"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "shard2 to generate policy one's ConfigMap in a new Namespace", func(ctx context.Context) bool {
		_, err := kube.CoreV1().ConfigMaps("team-red-2").Get(ctx, "one", metav1.GetOptions{})
		return err == nil
	})
	if w := shardWrites(proxies["shard1"]); len(w) > 0 {
		t.Errorf("shard1 wrote for a policy it released: %v", w)
	}

	// shard1, restarted with no policy of its own, retires no record of
	// shard2's: they are not orphans.
	if err := shards["shard1"].stop(t, 15*time.Second); err != nil {
		t.Fatalf("shard1's exit: %v", err)
	}
	proxies["shard1"].reset()
	start("shard1")
	eventually(t, "shard1 to start again", func(ctx context.Context) bool {
		return strings.Contains(shards["shard1"].logs.String(), "msg=started")
	})
	if logs := shards["shard1"].logs.String(); strings.Contains(logs, "policy gone while Sprout was stopped") {
		t.Errorf("shard1 took shard2's records for orphans:\n%s", logs)
	}
	for _, name := range []string{"one", "two"} {
		if configMap(ctx, name) == nil {
			t.Errorf("ConfigMap %s is gone after shard1's restart", name)
		}
	}
	if w := shardWrites(proxies["shard1"]); len(w) > 0 {
		t.Errorf("shard1 wrote at its restart: %v", w)
	}
	for shard, p := range proxies {
		if n := p.conflicts.Load(); n != 0 {
			t.Errorf("%s met %d write conflicts", shard, n)
		}
	}
}
