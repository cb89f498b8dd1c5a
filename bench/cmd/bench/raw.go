package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	sproutcluster "github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
)

// rawWrite is one of scenario 1's yardsticks: a plain client writing one
// ConfigMap into each Namespace, with Create (a) or server-side apply (b).
// The ConfigMap is the one sprout generates there, labels, annotations and
// all: those are what the control plane's cost of a write depends on. Plain
// writes, of name and data only, show what those labels cost.
type rawWrite struct {
	name  string
	apply bool
	plain bool
}

// write writes one ConfigMap into each of n Namespaces from workers
// goroutines, counted by the same watch that counts the controllers'
// ConfigMaps: its rate is from the first write until that watch saw the
// last, and the control plane's CPU time over the same span.
func (c *cluster) write(ctx context.Context, w rawWrite, prefix string, n, workers int, timeout time.Duration) (rate, error) {
	uids, err := c.namespaceUIDs(ctx)
	if err != nil {
		return rate{}, err
	}
	policy, err := benchmarkPolicy()
	if err != nil {
		return rate{}, err
	}
	objs := make([]*corev1.ConfigMap, n)
	for i := range objs {
		ns := namespaceName(prefix, i)
		obj := plainObject(ns)
		if !w.plain {
			obj = sproutObject(policy.GetName(), ns, uids[ns])
		}
		objs[i] = &corev1.ConfigMap{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, objs[i]); err != nil {
			return rate{}, err
		}
	}
	k, err := c.watchGenerated(ctx, n)
	if err != nil {
		return rate{}, err
	}
	cpu, start := c.cpuSeconds(), time.Now()
	_, err = parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		cm := objs[i]
		if !w.apply {
			_, err := c.kube.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
			return err
		}
		ac := corev1ac.ConfigMap(cm.Name, cm.Namespace).WithData(cm.Data)
		if len(cm.Labels) > 0 {
			ac.WithLabels(cm.Labels).WithAnnotations(cm.Annotations)
		}
		_, err := c.kube.CoreV1().ConfigMaps(cm.Namespace).Apply(ctx, ac, metav1.ApplyOptions{FieldManager: "sprout-bench", Force: true})
		return err
	})
	if err != nil {
		k.stop()
		return rate{}, err
	}
	count, _, last := k.wait(timeout)
	r := rateOf(count, last.Sub(start))
	r.ClusterCPUSeconds = c.cpuSeconds() - cpu
	if count < n {
		return r, fmt.Errorf("the watch saw %d of %d ConfigMaps within %s", count, n, timeout)
	}
	return r, nil
}

// plainObject is the benchmark policy's ConfigMap in Namespace ns with its
// name and data only.
func plainObject(ns string) *unstructured.Unstructured {
	data := map[string]any{}
	for k, v := range configMapData {
		data[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": generatedName, "namespace": ns},
		"data":       data,
	}}
}

// sproutObject is the ConfigMap that policy generates in Namespace ns, as
// sprout writes it: labelled with its origin and stamped.
func sproutObject(policy, ns string, uid types.UID) *unstructured.Unstructured {
	obj := plainObject(ns)
	inventory.Label(obj, inventory.Origin{
		Policy:     "GeneratingPolicy/" + policy,
		PolicyName: policy,
		Trigger:    inventory.ObjectRef{GVK: corev1.SchemeGroupVersion.WithKind("Namespace"), Name: ns, UID: uid},
	})
	inventory.Stamp(obj)
	rawProof.Sign(obj) // as Sprout signs its objects, with a key of its own
	return obj
}

// rawProof signs the raw writes' objects: Sprout's carry a proof of their
// origin (sproutcluster.ProofKey), and (a) and (b) must write the same bytes.
var rawProof = func() *sproutcluster.ProofKey {
	key := make([]byte, sproutcluster.MinProofKeyBytes)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	k, err := sproutcluster.NewProofKey(key)
	if err != nil {
		panic(err)
	}
	return k
}()

// unkeyed returns annotations with the proof's value replaced by its
// length: Sprout's key is not the raw writes'.
func unkeyed(annotations map[string]string) map[string]string {
	out := maps.Clone(annotations)
	if p, ok := out[sproutcluster.AnnotationProof]; ok {
		out[sproutcluster.AnnotationProof] = fmt.Sprintf("%d bytes", len(p))
	}
	return out
}

// namespaceUIDs maps every Namespace's name to its UID.
func (c *cluster) namespaceUIDs(ctx context.Context) (map[string]types.UID, error) {
	list, err := c.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	uids := make(map[string]types.UID, len(list.Items))
	for _, ns := range list.Items {
		uids[ns.Name] = ns.UID
	}
	return uids, nil
}

// sameShape tells, with the first difference, whether the ConfigMap sprout
// generated in Namespace ns carries the labels and annotations the raw
// writes give theirs: else (a) and (b) would measure other objects.
func (c *cluster) sameShape(ctx context.Context, ns string) error {
	got, err := c.kube.CoreV1().ConfigMaps(ns).Get(ctx, generatedName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	uids, err := c.namespaceUIDs(ctx)
	if err != nil {
		return err
	}
	policy, err := benchmarkPolicy()
	if err != nil {
		return err
	}
	want := sproutObject(policy.GetName(), ns, uids[ns])
	var diffs []string
	for _, m := range []struct {
		what      string
		got, want map[string]string
	}{{"labels", got.Labels, want.GetLabels()}, {"annotations", unkeyed(got.Annotations), unkeyed(want.GetAnnotations())}} {
		if !maps.Equal(m.got, m.want) {
			diffs = append(diffs, fmt.Sprintf("%s: sprout wrote %v, the raw writes %v", m.what, m.got, m.want))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("ConfigMap %s/%s: %s", ns, generatedName, strings.Join(diffs, "; "))
	}
	return nil
}
