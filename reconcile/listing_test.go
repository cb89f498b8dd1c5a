package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/reconcile"
)

// TestFirstObjectsBeforeTheTriggerListEnds: a policy's first sync writes
// the objects of the triggers its informer's list has brought while the
// list is still coming. The API server is made to hold the trigger
// watch-list after its first events until the first object is written;
// a sync that waited for the whole list would write nothing. The rest
// comes from the cache once listed: every trigger gets its object, each
// is evaluated once, and nothing is written twice.
func TestFirstObjectsBeforeTheTriggerListEnds(t *testing.T) {
	const n, ns = 300, "listing-held"
	kube := kubernetes.NewForConfigOrDie(cfg)
	createNamespace(t, ns, nil)
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	createTriggers(t, kube, ns, "listing", "held", n)

	// The list is held after its first 8 KiB, a dozen events, until the
	// controller writes an object of the policy.
	written := make(chan struct{})
	var firstWrite sync.Once
	held := holdingList(ns, "held", 8<<10, written, func(r string) {
		if r == "secrets" {
			firstWrite.Do(func() { close(written) })
		}
	})
	reg := prometheus.NewRegistry()
	runControllerOn(t, held, func(o *reconcile.Options) { o.Metrics = reg })
	// A Secret for each ConfigMap: writes to the resource being listed
	// wait for the list (waitListedWrites).
	applySecretCopy(t, "listing", "held")
	select {
	case <-written:
	case <-time.After(time.Minute):
		t.Fatal("no object written in a minute while the trigger list was held")
	}

	poll(t, "every trigger's object", func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "role=copy"})
		return err == nil && len(list.Items) == n, err
	})
	labels := map[string]string{"policy": "GeneratingPolicy/listing"}
	poll(t, "every object settled", func(context.Context) (bool, error) {
		return metricValue(t, reg, "sprout_settled_objects", labels) == n, nil
	})
	created := map[string]string{"policy": "GeneratingPolicy/listing", "action": "created"}
	poll(t, "the sync's end", func(context.Context) (bool, error) {
		return metricValue(t, reg, "sprout_objects_total", created) >= n, nil
	})
	if got := metricValue(t, reg, "sprout_objects_total", created); got != n {
		t.Errorf("%v objects created, want %d", got, n)
	}
	if got := metricValue(t, reg, "sprout_evaluations_total", map[string]string{"policy": "GeneratingPolicy/listing", "result": "evaluated"}); got != n {
		t.Errorf("%v evaluations, want one per trigger: %d", got, n)
	}
}

// createTriggers creates n ConfigMaps labelled label=value in ns.
func createTriggers(t *testing.T, kube kubernetes.Interface, ns, label, value string, n int) {
	t.Helper()
	if err := inParallel(16, n, func(i int) error {
		_, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t-%03d", i), Labels: map[string]string{label: value}},
		}, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// applySecretCopy applies configmap-copy as policy name, generating a
// Secret for each ConfigMap labelled listing=value, every one existing.
func applySecretCopy(t *testing.T, name, value string) {
	t.Helper()
	applyFixture(t, "configmap-copy", "policy.yaml", func(u *unstructured.Unstructured) {
		u.SetName(name)
		_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"listing": value}, "spec", "matchConstraints", "objectSelector", "matchLabels")
		_ = unstructured.SetNestedField(u.Object, true, "spec", "evaluation", "generateExisting", "enabled")
		gen, _, _ := unstructured.NestedSlice(u.Object, "spec", "generate")
		g := gen[0].(map[string]any)
		expr := strings.Replace(g["expression"].(string), `dyn("ConfigMap")`, `dyn("Secret")`, 1)
		g["expression"] = strings.Replace(expr, `"data": dyn({"source": object.metadata.name})`, `"type": dyn("Opaque")`, 1)
		_ = unstructured.SetNestedSlice(u.Object, gen, "spec", "generate")
	})
	t.Cleanup(func() { (&table{t: t}).deletePolicy(name) })
}

// TestAStalledListHoldsNoWorker: a first sync that takes its triggers as
// their list streams in gives its worker back when the stream stops
// bringing them: with one worker, a policy whose trigger list the API
// server holds for ever does not keep another policy from syncing.
func TestAStalledListHoldsNoWorker(t *testing.T) {
	const ns = "listing-stalled"
	kube := kubernetes.NewForConfigOrDie(cfg)
	createNamespace(t, ns, nil)
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	createTriggers(t, kube, ns, "listing", "stalled", 100)
	never := make(chan struct{})
	started := make(chan struct{})
	var firstWrite sync.Once
	held := holdingList(ns, "stalled", 4<<10, never, func(r string) {
		if r == "secrets" {
			firstWrite.Do(func() { close(started) })
		}
	})
	runControllerOn(t, held, func(o *reconcile.Options) { o.Workers = 1 })
	applySecretCopy(t, "listing-stalled", "stalled")
	// Its first sync writes what the stream brought, then waits for more.
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the stalled policy wrote nothing in a minute")
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "free", Labels: map[string]string{"listing": "free"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applySecretCopy(t, "listing-free", "free")
	poll(t, "the other policy's object", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Secrets(ns).Get(ctx, "free-out", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// holdingList returns cfg whose trigger watch-lists of the ConfigMaps
// labelled listing=value pass free bytes, then hold the rest until
// release is closed; posted sees every POST to the ConfigMaps or Secrets
// of ns, by resource.
func holdingList(ns, value string, free int, release <-chan struct{}, posted func(resource string)) *rest.Config {
	held := rest.CopyConfig(cfg)
	held.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			for _, r := range []string{"configmaps", "secrets"} {
				if req.Method == http.MethodPost && req.URL.Path == "/api/v1/namespaces/"+ns+"/"+r {
					posted(r)
				}
			}
			q := req.URL.Query()
			resp, err := rt.RoundTrip(req)
			if err == nil && req.Method == http.MethodGet && q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true" &&
				strings.Contains(q.Get("labelSelector"), "listing="+value) {
				resp.Body = &heldBody{ReadCloser: resp.Body, free: free, release: release, ctx: req.Context()}
			}
			return resp, err
		})
	})
	return held
}

// heldBody passes free bytes of a response, then holds the rest until
// release is closed.
type heldBody struct {
	io.ReadCloser
	free    int
	release <-chan struct{}
	ctx     context.Context
}

func (b *heldBody) Read(p []byte) (int, error) {
	if b.free > 0 {
		n, err := b.ReadCloser.Read(p[:min(len(p), b.free)])
		b.free -= n
		return n, err
	}
	select {
	case <-b.release:
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	}
	return b.ReadCloser.Read(p)
}

// TestWritesToTheListedResourceWaitForTheList: a policy that writes to the
// resource its triggers are being listed from (a ConfigMap for each
// ConfigMap) writes nothing until the list is in: the API server ends a
// watch that falls behind the writes to its resource, and one sending the
// initial events of a list takes in none, so creates during the list cut
// it short, again and again. Its triggers are evaluated meanwhile.
func TestWritesToTheListedResourceWaitForTheList(t *testing.T) {
	const n, ns = 100, "listing-same"
	kube := kubernetes.NewForConfigOrDie(cfg)
	createNamespace(t, ns, nil)
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	createTriggers(t, kube, ns, "listing", "same", n)
	release := make(chan struct{})
	var mu sync.Mutex
	released, writtenWhileHeld := false, 0
	held := holdingList(ns, "same", 4<<10, release, func(r string) {
		if r == "configmaps" {
			mu.Lock()
			if !released {
				writtenWhileHeld++
			}
			mu.Unlock()
		}
	})
	reg := prometheus.NewRegistry()
	logs, _ := runControllerOn(t, held, func(o *reconcile.Options) { o.Metrics = reg })
	applyFixture(t, "configmap-copy", "policy.yaml", func(u *unstructured.Unstructured) {
		u.SetName("listing-same")
		_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"listing": "same"}, "spec", "matchConstraints", "objectSelector", "matchLabels")
		_ = unstructured.SetNestedField(u.Object, true, "spec", "evaluation", "generateExisting", "enabled")
	})
	t.Cleanup(func() { (&table{t: t}).deletePolicy("listing-same") })
	poll(t, "the writes to wait for the list", func(context.Context) (bool, error) {
		return strings.Contains(logs.String(), "writes wait for the list of the triggers they would cut short"), nil
	})
	if got := metricValue(t, reg, "sprout_evaluations_total", map[string]string{"policy": "GeneratingPolicy/listing-same", "result": "evaluated"}); got < 1 {
		t.Errorf("%v triggers evaluated while the list was held, want those it brought", got)
	}
	mu.Lock()
	released = true
	if writtenWhileHeld > 0 {
		t.Errorf("%d ConfigMaps created while the ConfigMaps' list was held", writtenWhileHeld)
	}
	mu.Unlock()
	close(release)
	poll(t, "every trigger's object", func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "role=copy"})
		return err == nil && len(list.Items) == n, err
	})
}
