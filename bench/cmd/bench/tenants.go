package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

var namespacedPolicies = schema.GroupVersionResource{Group: "policies.kyverno.io", Version: "v1", Resource: "namespacedgeneratingpolicies"}

// tenantNamespace is where the tenants part's attacks run.
const tenantNamespace = "tenant"

// tenants is issue #43's scenario 11: the benchmark policy at a steady
// trigger rate, run twice on fresh clusters: alone, then while a tenant's
// NamespacedGeneratingPolicies attack (a YAML alias bomb, four policies
// comparing lists of shared lists whose logical size is exponential, and
// two that generate each other's triggers with skipBackgroundRequests
// false). The platform policy's p99 latency with them is judged against
// its p99 alone.
func (b *bench) tenants(ctx context.Context) error {
	r := &b.res.Tenants
	for _, loaded := range []bool{false, true} {
		name := "tenants-alone"
		if loaded {
			name = "tenants-attacked"
		}
		err := b.withCluster(name, func(c *cluster, dir string) error {
			p, err := b.startReady(ctx, "sprout", c, dir)
			if err != nil {
				return err
			}
			defer p.stop()
			measured := ctx
			if loaded {
				if err := c.attack(ctx); err != nil {
					return fmt.Errorf("the tenant's attacks: %w", err)
				}
				var stop context.CancelFunc
				measured, stop = context.WithCancel(ctx)
				defer stop()
				go c.keepAttacking(measured)
			}
			run, err := b.platformLatency(measured, c, p, name)
			if loaded {
				r.Attacked = run
			} else {
				r.Alone = run
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// platformLatency creates Namespaces at SteadyRate for TenantsSeconds and
// measures how long each one's ConfigMap took, from its Create call's
// response to the first sight of it on a watch.
func (b *bench) platformLatency(ctx context.Context, c *cluster, p *process, name string) (latencyRun, error) {
	n := int(b.SteadyRate * b.TenantsSeconds)
	k, err := c.watchGenerated(ctx, n)
	if err != nil {
		return latencyRun{}, err
	}
	returned, err := c.createNamespacesAt(ctx, "platform", b.SteadyRate, time.Duration(b.TenantsSeconds*float64(time.Second)))
	if err != nil {
		return latencyRun{}, fmt.Errorf("create Namespaces: %w", err)
	}
	count, _, _ := k.wait(b.timeout)
	var latencies []time.Duration
	for i, t := range returned {
		if seen, ok := k.seenAt(namespaceName("platform", i), generatedName); ok {
			latencies = append(latencies, max(0, seen.Sub(t)))
		}
	}
	r := latencyRun{Triggers: n, Seen: count, Latency: latencyOf(latencies), CPUSeconds: p.cpuSeconds(), PeakRSSMiB: p.peakRSSMiB()}
	logf("%s: %d/%d ConfigMaps, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %.1f CPU s", name, count, n,
		r.Latency.P50Ms, r.Latency.P99Ms, r.Latency.MaxMs, r.CPUSeconds)
	return r, nil
}

// attack makes the tenant's namespace, its account's rights there, its
// policies, and the triggers that set them off.
func (c *cluster) attack(ctx context.Context) error {
	kube := c.kube
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// No controller-manager makes the default account here.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: tenantNamespace}}
	if _, err := kube.CoreV1().ServiceAccounts(tenantNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant-configmaps", Namespace: tenantNamespace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}}}
	if _, err := kube.RbacV1().Roles(tenantNamespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-configmaps", Namespace: tenantNamespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: tenantNamespace}}}
	if _, err := kube.RbacV1().RoleBindings(tenantNamespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return err
	}
	docs := []string{tenantPolicy("bomb", "bomb", "", `string(size(yaml.parse(object.data.value)))`, nil)}
	for i := range 4 {
		docs = append(docs, tenantPolicy(fmt.Sprintf("starve-%d", i), "starve", "", `string(variables.l40 == variables.m40)`, starvation(40)))
	}
	docs = append(docs, tenantPolicy("ping", "ping", "pong", `"ping"`, nil), tenantPolicy("pong", "pong", "ping", `"pong"`, nil))
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return err
		}
		if _, err := c.dynamic.Resource(namespacedPolicies).Namespace(tenantNamespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("policy %s: %w", obj.GetName(), err)
		}
	}
	for _, t := range []struct{ name, label, value string }{
		{"bomb", "bomb", aliasBomb()}, {"starve", "starve", "x"}, {"start", "ping", "x"},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: t.name, Namespace: tenantNamespace, Labels: map[string]string{"attack": t.label}},
			Data: map[string]string{"value": t.value}}
		if _, err := kube.CoreV1().ConfigMaps(tenantNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// keepAttacking changes the bomb's and the starvation's triggers twice a
// second until ctx ends, so that the tenant's policies evaluate them again
// all along the measurement.
func (c *cluster) keepAttacking(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		for _, name := range []string{"bomb", "starve"} {
			patch := fmt.Sprintf(`{"metadata": {"annotations": {"tick": "%d"}}}`, i)
			_, _ = c.kube.CoreV1().ConfigMaps(tenantNamespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// tenantPolicy is a NamespacedGeneratingPolicy on the tenant's ConfigMaps
// labelled attack: from, generating one labelled attack: to whose data
// holds value; to, when set, also turns skipBackgroundRequests off, so
// that it triggers on what the other policies generated.
func tenantPolicy(name, from, to, value string, variables []string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "apiVersion: policies.kyverno.io/v1\nkind: NamespacedGeneratingPolicy\nmetadata: {name: %s, namespace: %s}\nspec:\n", name, tenantNamespace)
	if to != "" {
		s.WriteString("  evaluation:\n    skipBackgroundRequests: false\n")
	}
	fmt.Fprintf(&s, `  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
    objectSelector:
      matchLabels: {attack: %s}
`, from)
	if len(variables) > 0 {
		s.WriteString("  variables:\n")
		for _, v := range variables {
			s.WriteString(v)
		}
	}
	fmt.Fprintf(&s, `  generate:
  - expression: >-
      generator.Apply([{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": object.metadata.name + "-%s", "labels": {"attack": "%s"}}, "data": {"value": %s}}])
`, name, to, value)
	return s.String()
}

// starvation is the variables of two lists of depth levels, each level
// the one below twice: a few nodes, 2^depth elements to compare.
func starvation(depth int) []string {
	var out []string
	for _, l := range []string{"l", "m"} {
		// Equal leaves: the comparison stops at no difference.
		out = append(out, fmt.Sprintf("  - {name: %s0, expression: \"[object.metadata.name, 'x']\"}\n", l))
		for i := 1; i <= depth; i++ {
			out = append(out, fmt.Sprintf("  - {name: %s%d, expression: \"[variables.%s%d, variables.%s%d]\"}\n", l, i, l, i-1, l, i-1))
		}
	}
	return out
}

// aliasBomb is YAML of 76 KiB whose aliases name a 12 KiB string 16,000
// times: 188 MiB once expanded.
func aliasBomb() string {
	return "a: &a " + strings.Repeat("x", 12<<10) + "\nb: [" + strings.TrimSuffix(strings.Repeat("*a, ", 16000), ", ") + "]\n"
}

// tenantsResult is scenario 11: the platform policy's latency alone and
// while a tenant attacks.
type tenantsResult struct {
	Alone    latencyRun `json:"alone"`
	Attacked latencyRun `json:"attacked"`
}
