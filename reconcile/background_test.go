package reconcile_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// chainPolicy generates, for each ConfigMap labelled chain: from, a
// ConfigMap <trigger>-<suffix> labelled chain: to.
func chainPolicy(name, from, to, suffix string, skipBackground bool) string {
	skip := ""
	if !skipBackground {
		skip = "    skipBackgroundRequests: false\n"
	}
	return strings.NewReplacer("%NAME%", name, "%FROM%", from, "%TO%", to, "%SUFFIX%", suffix, "%SKIP%", skip).Replace(`apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata:
  name: %NAME%
spec:
  evaluation:
    synchronize: {enabled: true}
%SKIP%  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
    objectSelector:
      matchLabels: {chain: %FROM%}
  generate:
  - expression: >-
      generator.Apply(object.metadata.namespace, [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": object.metadata.name + "-%SUFFIX%", "labels": {"chain": "%TO%"}}}])
`)
}

// TestPoliciesDoNotFeedEachOther: ping generates what pong triggers on, and
// pong what ping triggers on. With Kyverno's default,
// skipBackgroundRequests: true, what a policy generated triggers no
// generating policy, and the chain stops at once; a policy that opts out
// triggers on it, and the chain stops at the next policy that does not.
// Before, the two generated 6,432 objects in a minute, and climbing.
func TestPoliciesDoNotFeedEachOther(t *testing.T) {
	_, c := runController(t, nil)
	tb := newTable(t, "chain")
	tb.applyPolicy(chainPolicy("chain-ping", "ping", "pong", "p", true))
	tb.applyPolicy(chainPolicy("chain-pong", "pong", "ping", "q", true))
	t.Cleanup(func() { tb.deletePolicy("chain-ping"); tb.deletePolicy("chain-pong") })
	start := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "start", Namespace: tb.ns, Labels: map[string]string{"chain": "ping"}}}
	if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(context.Background(), start, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.waitFor("ping's object", "start-p", exists)
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	poll(t, "pong's informer holding ping's object, and the policies idle", func(context.Context) (bool, error) {
		// The generated objects' informer and pong's (chain=pong).
		return len(c.CachedVersions(configMaps, tb.ns)["start-p"]) >= 2 && c.SyncsIdle(), nil
	})
	if cm, err := getConfigMap(context.Background(), tb.ns, "start-p-q"); err != nil || cm != nil {
		t.Fatalf("pong triggered on what ping generated: %v, %v", cm != nil, err)
	}

	// pong opts out: it triggers on what ping generated; ping, which does
	// not, stops the chain there.
	tb.applyPolicy(chainPolicy("chain-pong", "pong", "ping", "q", false))
	tb.waitFor("pong's object from ping's", "start-p-q", exists)
	poll(t, "the policies idle", func(context.Context) (bool, error) { return c.SyncsIdle(), nil })
	if cm, err := getConfigMap(context.Background(), tb.ns, "start-p-q-p"); err != nil || cm != nil {
		t.Fatalf("ping triggered on what pong generated: %v, %v", cm != nil, err)
	}
	list, err := tb.kube.CoreV1().ConfigMaps(tb.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "chain"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Errorf("%d ConfigMaps in the chain, want 3 (start, start-p, start-p-q)", len(list.Items))
	}
}
