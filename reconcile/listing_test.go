package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/reconcile"
)

// TestFirstObjectsBeforeTheTriggerListEnds: a policy's first sync writes
// the objects of the triggers its informer's list has brought while the
// list is still coming. The trigger list's pages after its first are held
// until the first object is written; a sync that waited for the whole
// list would write nothing. The rest
// comes from the cache once listed: every trigger gets its object, each
// is evaluated once, and nothing is written twice.
func TestFirstObjectsBeforeTheTriggerListEnds(t *testing.T) {
	const n, ns = 300, "listing-held"
	kube := kubernetes.NewForConfigOrDie(cfg)
	createNamespace(t, ns, nil)
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	createTriggers(t, kube, ns, "listing", "held", n)

	// The list is held after its first page of 20 until the controller
	// writes an object of the policy.
	written := make(chan struct{})
	var firstWrite sync.Once
	held, _ := holdingList(ns, "held", 20, written, func(r string) {
		if r == "secrets" {
			firstWrite.Do(func() { close(written) })
		}
	})
	reg := prometheus.NewRegistry()
	logs, _ := runControllerOn(t, held, func(o *reconcile.Options) { o.Metrics = reg })
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

	// The sync that took the list as it came matched all of it: the list's
	// end queues no second full sync, and a trigger created after it is
	// synced alone.
	poll(t, "the list's end", func(context.Context) (bool, error) {
		return strings.Contains(logs.String(), `msg="triggers listed"`), nil
	})
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t-%03d", n), Labels: map[string]string{"listing": "held"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the new trigger's object", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Secrets(ns).Get(ctx, fmt.Sprintf("t-%03d-out", n), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	syncs := func(mode string) float64 {
		return metricValue(t, reg, "sprout_syncs_total", map[string]string{"policy": "GeneratingPolicy/listing", "mode": mode})
	}
	if full, inc := syncs("full"), syncs("incremental"); full != 1 || inc < 1 {
		t.Errorf("%v full syncs and %v incremental ones, want the first full one and an incremental one since", full, inc)
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
// their list's pages come gives its worker back when the pages stop
// coming: with one worker, a policy whose trigger list the API
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
	held, _ := holdingList(ns, "stalled", 20, never, func(r string) {
		if r == "secrets" {
			firstWrite.Do(func() { close(started) })
		}
	})
	runControllerOn(t, held, func(o *reconcile.Options) { o.Workers = 1 })
	applySecretCopy(t, "listing-stalled", "stalled")
	// Its first sync writes what the first page brought, then waits for
	// more.
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

// holdingList returns cfg whose lists of the ConfigMaps labelled
// listing=value come in pages of page objects, the pages after the first
// held until release is closed, and the number of those lists begun;
// posted sees every POST to the ConfigMaps or Secrets of ns, by resource.
func holdingList(ns, value string, page int, release <-chan struct{}, posted func(resource string)) (*rest.Config, *atomic.Int32) {
	held := rest.CopyConfig(cfg)
	lists := &atomic.Int32{}
	held.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			for _, r := range []string{"configmaps", "secrets"} {
				if req.Method == http.MethodPost && req.URL.Path == "/api/v1/namespaces/"+ns+"/"+r {
					posted(r)
				}
			}
			q := req.URL.Query()
			if req.Method == http.MethodGet && q.Get("watch") != "true" && q.Get("limit") != "" &&
				strings.Contains(q.Get("labelSelector"), "listing="+value) {
				q.Set("limit", fmt.Sprint(page))
				req.URL.RawQuery = q.Encode()
				if q.Get("continue") == "" {
					lists.Add(1)
				} else {
					select {
					case <-release:
					case <-req.Context().Done():
						return nil, req.Context().Err()
					}
				}
			}
			return rt.RoundTrip(req)
		})
	})
	return held, lists
}

// TestWritesToTheListedResourceDoNotWaitForTheList: a policy that writes
// to the resource its triggers are being listed from (a ConfigMap for
// each ConfigMap) writes the objects of the list's first page while the
// rest is held, and its writes do not cut the list short: it is listed
// once. (A watch-list would be: the API server ends a watch that falls
// behind the writes to its resource, and one sending the initial events
// of a list takes in none.)
func TestWritesToTheListedResourceDoNotWaitForTheList(t *testing.T) {
	const n, ns = 100, "listing-same"
	kube := kubernetes.NewForConfigOrDie(cfg)
	createNamespace(t, ns, nil)
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	createTriggers(t, kube, ns, "listing", "same", n)
	written := make(chan struct{})
	var firstWrite sync.Once
	held, lists := holdingList(ns, "same", 20, written, func(r string) {
		if r == "configmaps" {
			firstWrite.Do(func() { close(written) })
		}
	})
	runControllerOn(t, held, nil)
	applyFixture(t, "configmap-copy", "policy.yaml", func(u *unstructured.Unstructured) {
		u.SetName("listing-same")
		_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"listing": "same"}, "spec", "matchConstraints", "objectSelector", "matchLabels")
		_ = unstructured.SetNestedField(u.Object, true, "spec", "evaluation", "generateExisting", "enabled")
	})
	t.Cleanup(func() { (&table{t: t}).deletePolicy("listing-same") })
	select {
	case <-written:
	case <-time.After(time.Minute):
		t.Fatal("no ConfigMap written in a minute while the ConfigMaps' list was held")
	}
	poll(t, "every trigger's object", func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "role=copy"})
		return err == nil && len(list.Items) == n, err
	})
	if got := lists.Load(); got != 1 {
		t.Errorf("the triggers were listed %d times, want once", got)
	}
}

// TestASyncThatWaitedForTheNamespacesIsWokenWhenTheyAreListed: a policy
// whose triggers are namespaced waits for the Namespace cache; once it
// has listed, the policy is queued at once, not left to its back-off. The
// Namespace list is held until the policy has waited so often that its
// next back-off is 3.2 s; after the list is let through, its first object
// comes well before that.
func TestASyncThatWaitedForTheNamespacesIsWokenWhenTheyAreListed(t *testing.T) {
	const ns = "listing-nswake"
	kube := kubernetes.NewForConfigOrDie(cfg)
	createNamespace(t, ns, nil)
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	createTriggers(t, kube, ns, "listing", "nswake", 3)

	release := make(chan struct{})
	held := rest.CopyConfig(cfg)
	held.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && req.URL.Path == "/api/v1/namespaces" {
				select {
				case <-release:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			return rt.RoundTrip(req)
		})
	})
	reg := prometheus.NewRegistry()
	runControllerOn(t, held, func(o *reconcile.Options) { o.Metrics = reg })
	applySecretCopy(t, "nswake", "nswake")

	// Each sync that waits is queued again after 100 ms, doubled at each
	// wait up to 3.2 s at the sixth; with the policy's first add and the
	// trigger list's end, eight adds are past the sixth wait.
	adds := func() float64 {
		return metricValue(t, reg, "sprout_workqueue_adds_total", map[string]string{"name": "policies"})
	}
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return adds() >= 8, nil
	}); err != nil {
		t.Fatalf("the policy did not wait for the Namespace cache: %v adds", adds())
	}
	close(release)
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Secrets(ns).Get(ctx, "t-000-out", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("no object within 2 s of the Namespaces listed (its back-off was 3.2 s): %v", err)
	}
}
