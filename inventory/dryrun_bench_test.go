package inventory

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/internal/controlplane"
)

// benchClients returns an Applier and a client of the test control plane,
// which it starts once.
func benchClients(b *testing.B) (*Applier, client.Client) {
	b.Helper()
	started.Do(func() { controlPlane, startErr = controlplane.Start() })
	if startErr != nil {
		b.Fatal(startErr)
	}
	a, err := NewApplier(controlPlane.Config, new(cluster.CreatedVersions), nil)
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.New(controlPlane.Config, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return a, c
}

// BenchmarkDiff measures `sprout diff`'s path for a small case: a
// ConfigMap and a Secret that would change, each read, sent as a
// server-side dry-run apply and compared, against the test control plane.
func BenchmarkDiff(b *testing.B) {
	a, c := benchClients(b)
	ctx := context.Background()
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName("bench-diff")
	if err := c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		b.Fatal(err)
	}
	cm := generated("bench-diff", "zk", map[string]any{"ZK_ADDRESS": "192.168.10.10:2181", "KAFKA_ADDRESS": "192.168.10.13:9092"})
	secret := generated("bench-diff", "creds", nil)
	secret.SetKind("Secret")
	delete(secret.Object, "data")
	secret.Object["stringData"] = map[string]any{"user": "admin", "password": "old-password"}
	// The benchmark runs more than once: the first run creates, the others
	// find the objects as they were.
	for _, o := range []*unstructured.Unstructured{cm, secret} {
		if _, err := a.serverApply(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	cm = generated("bench-diff", "zk", map[string]any{"ZK_ADDRESS": "10.0.0.1:2181", "KAFKA_ADDRESS": "192.168.10.13:9092"})
	secret.Object["stringData"] = map[string]any{"user": "admin", "password": "new-password"}
	objects := []*unstructured.Unstructured{cm, secret}
	live := cachedObjects{}
	for _, o := range objects {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			b.Fatal(err)
		}
		live[got.GetName()] = toCache(got)
	}
	b.ReportAllocs()
	for b.Loop() {
		cs, err := a.DryRun().Apply(ctx, objects, live, ApplyOptions{Synchronize: true})
		if err != nil || cs.Count(Configured) != 2 {
			b.Fatalf("dry run: %v %+v", err, cs.Changes)
		}
	}
}

// BenchmarkCreate measures a generated object's create, as a cold
// generation sends it: the body, the request and the reading of its
// answer, against the test control plane. Its allocations are the
// client's alone (the API server is another process).
func BenchmarkCreate(b *testing.B) {
	a, c := benchClients(b)
	ctx := context.Background()
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetGenerateName("bench-create-")
	if err := c.Create(ctx, ns); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	objects, _ := desiredSet(b.N + 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		o := objects[i]
		o.SetNamespace(ns.GetName())
		ch, err := a.create(ctx, o)
		if err != nil || ch.ResourceVersion == "" {
			b.Fatalf("create: %v, version %q", err, ch.ResourceVersion)
		}
	}
}
