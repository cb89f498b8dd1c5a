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
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	names := make(chan string)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for name := range names {
				_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"listing": "held"}},
				}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		names <- fmt.Sprintf("t-%03d", i)
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// The list is held after its first 8 KiB, a dozen events, until the
	// controller writes an object of the policy.
	written := make(chan struct{})
	var firstWrite sync.Once
	held := rest.CopyConfig(cfg)
	held.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPost && req.URL.Path == "/api/v1/namespaces/"+ns+"/secrets" {
				firstWrite.Do(func() { close(written) })
			}
			q := req.URL.Query()
			resp, err := rt.RoundTrip(req)
			if err == nil && req.Method == http.MethodGet && q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true" &&
				strings.Contains(q.Get("labelSelector"), "listing=held") {
				resp.Body = &heldBody{ReadCloser: resp.Body, free: 8 << 10, release: written, ctx: req.Context()}
			}
			return resp, err
		})
	})
	reg := prometheus.NewRegistry()
	runControllerOn(t, held, func(o *reconcile.Options) { o.Metrics = reg })
	// A Secret for each ConfigMap: writes to the resource being listed
	// wait for the list (waitListedWrites).
	applyFixture(t, "configmap-copy", "policy.yaml", func(u *unstructured.Unstructured) {
		u.SetName("listing")
		_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"listing": "held"}, "spec", "matchConstraints", "objectSelector", "matchLabels")
		_ = unstructured.SetNestedField(u.Object, true, "spec", "evaluation", "generateExisting", "enabled")
		gen, _, _ := unstructured.NestedSlice(u.Object, "spec", "generate")
		g := gen[0].(map[string]any)
		expr := strings.Replace(g["expression"].(string), `dyn("ConfigMap")`, `dyn("Secret")`, 1)
		g["expression"] = strings.Replace(expr, `"data": dyn({"source": object.metadata.name})`, `"type": dyn("Opaque")`, 1)
		_ = unstructured.SetNestedSlice(u.Object, gen, "spec", "generate")
	})
	t.Cleanup(func() { (&table{t: t}).deletePolicy("listing") })
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
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	for i := range n {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t-%03d", i), Labels: map[string]string{"listing": "same"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	var mu sync.Mutex
	released, writtenWhileHeld := false, 0
	held := rest.CopyConfig(cfg)
	held.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPost && req.URL.Path == "/api/v1/namespaces/"+ns+"/configmaps" {
				mu.Lock()
				if !released {
					writtenWhileHeld++
				}
				mu.Unlock()
			}
			q := req.URL.Query()
			resp, err := rt.RoundTrip(req)
			if err == nil && req.Method == http.MethodGet && q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true" &&
				strings.Contains(q.Get("labelSelector"), "listing=same") {
				resp.Body = &heldBody{ReadCloser: resp.Body, free: 4 << 10, release: release, ctx: req.Context()}
			}
			return resp, err
		})
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
