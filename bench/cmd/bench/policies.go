package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// manyPolicies is scenario 5, with 6's heap profile at its end: M
// Namespaces and P copies of the benchmark policy, each generating a
// ConfigMap of its own name, exist before sprout starts; it lasts until
// all P×M ConfigMaps were seen.
func (b *bench) manyPolicies(ctx context.Context) error {
	m, np := b.PolicyNamespaces, b.Policies
	total := m * np
	r := &b.res.Policies
	r.Policies, r.Namespaces = np, m
	return b.withCluster("policies", func(c *cluster, dir string) error {
		if _, _, err := c.createNamespaces(ctx, "many", m, b.Parallel); err != nil {
			return fmt.Errorf("create Namespaces: %w", err)
		}
		for i := range np {
			if err := c.createPolicyNamed(ctx, fmt.Sprintf("%s-%02d", generatedName, i)); err != nil {
				return fmt.Errorf("create policy %d: %w", i, err)
			}
		}
		k, err := c.watchConfigMaps(ctx, total, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=sprout"})
		if err != nil {
			return err
		}
		log := filepath.Join(dir, "sprout.log")
		p, err := startSprout(b.sprout, c.kubeconfig, log, b.sproutArgs()...)
		if err != nil {
			return err
		}
		defer p.stop()
		count, first, last := k.wait(b.timeout)
		r.Sprout = newRun(count, total, p.started, first, last, p)
		logf("policies: sprout: %d/%d ConfigMaps of %d policies in %.2fs (%.0f/s)", count, total, np, r.Sprout.Seconds, r.Sprout.PerSecond)
		if count < total {
			return fmt.Errorf("sprout generated %d of %d ConfigMaps within %s (log: %s)", count, total, b.timeout, log)
		}
		pollUntil(b.timeout, func() bool { return p.metricSum(ctx, "sprout_objects_total{") >= float64(total) })
		time.Sleep(2 * time.Second)
		logf("policies: sprout: %.0f objects settled", p.metricSum(ctx, "sprout_settled_objects{"))
		// The peak before the heap profile: building one is the bench's
		// request, not the controller's work.
		r.Sprout.PeakRSSMiB = p.peakRSSMiB()
		prof := &b.res.Profiles
		prof.PoliciesHeap, prof.PoliciesAllocs, err = p.heapProfile(ctx, filepath.Join(dir, "heap.pprof"))
		return err
	})
}

// createPolicyNamed creates a copy of the benchmark policy named name that
// generates a ConfigMap of that name.
func (c *cluster) createPolicyNamed(ctx context.Context, name string) error {
	obj, err := benchmarkPolicy()
	if err != nil {
		return err
	}
	obj.SetName(name)
	vars, _, err := unstructured.NestedSlice(obj.Object, "spec", "variables")
	if err != nil {
		return err
	}
	renamed := false
	for _, v := range vars {
		if m, ok := v.(map[string]any); ok {
			if expr, ok := m["expression"].(string); ok && strings.Contains(expr, `"name": "`+generatedName+`"`) {
				m["expression"] = strings.ReplaceAll(expr, `"name": "`+generatedName+`"`, `"name": "`+name+`"`)
				renamed = true
			}
		}
	}
	if !renamed {
		return fmt.Errorf(`no variable of fixtures/zk-kafka-address/policy.yaml holds "name": %q`, generatedName)
	}
	if err := unstructured.SetNestedSlice(obj.Object, vars, "spec", "variables"); err != nil {
		return err
	}
	_, err = c.dynamic.Resource(policies).Create(ctx, obj, metav1.CreateOptions{})
	return err
}
