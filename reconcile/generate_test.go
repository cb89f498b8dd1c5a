package reconcile_test

import (
	"context"
	"fmt"
	dto "github.com/prometheus/client_model/go"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile"
)

// TestLargeSyncWritesBeforeItHasEvaluatedEverything: a sync of 1,000
// existing triggers evaluates and applies them a part at a time, so its
// first object is written long before the last trigger is evaluated
// (evaluations are counted before their part is applied; a sync that
// evaluated everything first would have counted 1,000). The parts add up:
// every object is written once, each trigger evaluated once, every object
// settles, and nothing of an earlier part is pruned.
func TestLargeSyncWritesBeforeItHasEvaluatedEverything(t *testing.T) {
	const n = 1000
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	createColoredNamespaces(t, "parts", n)

	reg := prometheus.NewRegistry()
	evaluated := func() float64 {
		return metricValue(t, reg, "sprout_evaluations_total", map[string]string{"policy": "GeneratingPolicy/parts", "result": "evaluated"})
	}
	// The count is read as the controller sends its first write of the
	// policy's objects, on the controller's own goroutine: how busy the
	// machine is cannot move it, as it could a read after a watch event.
	// So is how many triggers the sync had looked at: it matches them a
	// part at a time too, and one that matched them all first would have
	// seen every Namespace.
	type firstWrite struct {
		evaluated float64
		seen      int
	}
	atFirstWrite := make(chan firstWrite, 1)
	var first sync.Once
	var controller atomic.Pointer[reconcile.Controller]
	watched := rest.CopyConfig(cfg)
	watched.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet && strings.HasPrefix(req.URL.Path, "/api/v1/namespaces/parts-") && strings.Contains(req.URL.Path, "/configmaps") {
				first.Do(func() { atFirstWrite <- firstWrite{evaluated(), controller.Load().RoundSeen("GeneratingPolicy/parts")} })
			}
			return rt.RoundTrip(req)
		})
	})
	_, c := runControllerOn(t, watched, func(o *reconcile.Options) { o.Metrics = reg })
	controller.Store(c)
	selector := sproutv1alpha1.LabelPolicyName + "=parts"
	applyColorPolicy(t, "parts", "parts", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, true, "spec", "evaluation", "generateExisting", "enabled")
	})
	select {
	case got := <-atFirstWrite:
		if got.evaluated >= n {
			t.Errorf("%v triggers evaluated when the first object was written, want fewer than %d", got.evaluated, n)
		}
		// The Namespaces of other tests are looked at too, and a list
		// streaming in may bring them all first (it comes in name order).
		all, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if others := len(all.Items) - n; got.seen < 0 || got.seen >= n/2+others {
			t.Errorf("%d triggers looked at when the first object was written, want fewer than %d (half of %d and the %d other Namespaces)", got.seen, n/2+others, n, others)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("no object of the policy written in 2 minutes")
	}

	poll(t, "every object written and settled", func(context.Context) (bool, error) {
		return metricValue(t, reg, "sprout_settled_objects", map[string]string{"policy": "GeneratingPolicy/parts"}) == n, nil
	})
	list, err := kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != n {
		t.Errorf("%d objects, want %d", len(list.Items), n)
	}
	// Namespaces of other tests are triggers too; those being deleted are
	// not evaluated.
	namespaces, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	triggers := 0
	for _, ns := range namespaces.Items {
		if ns.DeletionTimestamp == nil {
			triggers++
		}
	}
	if got := evaluated(); got != float64(triggers) {
		t.Errorf("%v evaluations, want one per trigger: %d", got, triggers)
	}
	for action, want := range map[string]float64{"created": n, "deleted": -1} { // -1: none ever
		if got := metricValue(t, reg, "sprout_objects_total", map[string]string{"policy": "GeneratingPolicy/parts", "action": action}); got != want {
			t.Errorf("%v objects %s, want %v", got, action, want)
		}
	}
	(&table{t: t}).deletePolicy("parts")
	// A thousand deletes: under make test's load they took over poll's
	// 30 s once, so this wait has a bound of its own.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(list.Items) == 0, err
	})
	if err != nil {
		t.Fatalf("waiting for the objects pruned with their policy: %v", err)
	}
}

// TestAPartIsWrittenBeforeTheNextIsEvaluated: a sync hands a part's apply
// to another goroutine and goes on evaluating the next part; the apply's
// first request goes out first. On one processor, with nothing to preempt
// the sync, the apply waited until the sync stopped to wait for one of its
// applies, three parts later.
func TestAPartIsWrittenBeforeTheNextIsEvaluated(t *testing.T) {
	const n = 150
	createColoredNamespaces(t, "handed", n)
	// One processor, so that only the order of the hand-offs decides what
	// runs first, and no collection, whose assist may park the apply while
	// the sync runs on.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))

	// The count is read where the request is sent, without yielding the
	// processor: a registry's Gather runs goroutines, and the sync would
	// evaluate on meanwhile.
	reg := &capturing{Registry: prometheus.NewRegistry(), name: "sprout_evaluations_total"}
	atFirstWrite := make(chan float64, 1)
	var first sync.Once
	watched := rest.CopyConfig(cfg)
	watched.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet && strings.HasPrefix(req.URL.Path, "/api/v1/namespaces/handed-") && strings.Contains(req.URL.Path, "/configmaps") {
				first.Do(func() {
					var m dto.Metric
					_ = reg.vec.WithLabelValues("GeneratingPolicy/handed", "evaluated").Write(&m)
					atFirstWrite <- m.GetCounter().GetValue()
				})
			}
			return rt.RoundTrip(req)
		})
	})
	runControllerOn(t, watched, func(o *reconcile.Options) { o.Metrics = reg })
	applyColorPolicy(t, "handed", "handed", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, true, "spec", "evaluation", "generateExisting", "enabled")
		// Other tests' Namespaces are not evaluated: parts hold this test's.
		_ = unstructured.SetNestedField(u.Object, "handed", "spec", "matchConstraints", "objectSelector", "matchLabels", "color")
	})
	select {
	case got := <-atFirstWrite:
		if got > 16 {
			t.Errorf("%v triggers evaluated when the first object was written, want a first part's 16 at most", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("no object of the policy written in a minute")
	}
	poll(t, "every object written", func(ctx context.Context) (bool, error) {
		return metricValue(t, reg.Registry, "sprout_objects_total", map[string]string{"policy": "GeneratingPolicy/handed", "action": "created"}) == n, nil
	})
}

// capturing is a registry that keeps the counter vector registered as name.
type capturing struct {
	*prometheus.Registry
	name string
	vec  *prometheus.CounterVec
}

func (c *capturing) Register(col prometheus.Collector) error {
	if v, ok := col.(*prometheus.CounterVec); ok {
		descs := make(chan *prometheus.Desc, 1)
		v.Describe(descs)
		if strings.Contains((<-descs).String(), `"`+c.name+`"`) {
			c.vec = v
		}
	}
	return c.Registry.Register(col)
}

// TestFullSyncsShareABudgetOfTriggersInFlight: the full syncs of several
// policies at once hold no more triggers evaluated and not yet applied
// than their shared budget, however many workers run them, and every
// object is still written. Each part holds its desired objects in full
// until applied; without the budget, each sync holds up to three parts
// (64, 128 and 256 triggers here, after the first ones of 16 and 32),
// three syncs at once more than 1,000.
// What is held is counted from outside the sync: the policies' evaluations
// when each create is sent, less the creates sent before it.
func TestFullSyncsShareABudgetOfTriggersInFlight(t *testing.T) {
	const n, policies, budget = 600, 3, 256
	createColoredNamespaces(t, "budget", n)

	reg := prometheus.NewRegistry()
	evaluated := func() float64 {
		var sum float64
		for i := range policies {
			if v := metricValue(t, reg, "sprout_evaluations_total", map[string]string{"policy": fmt.Sprintf("GeneratingPolicy/budget-%d", i), "result": "evaluated"}); v > 0 {
				sum += v
			}
		}
		return sum
	}
	var mu sync.Mutex
	var sent, most float64
	watched := rest.CopyConfig(cfg)
	watched.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPost && strings.HasPrefix(req.URL.Path, "/api/v1/namespaces/budget-") && strings.HasSuffix(req.URL.Path, "/configmaps") {
				mu.Lock()
				most = max(most, evaluated()-sent)
				sent++
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	logs, _ := runControllerOn(t, watched, func(o *reconcile.Options) {
		o.Metrics, o.Workers, o.TriggersInFlight = reg, 8, budget
	})
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	for i := range policies {
		name := fmt.Sprintf("budget-%d", i)
		applyColorPolicy(t, name, "budget", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "budget", "spec", "matchConstraints", "objectSelector", "matchLabels", "color")
			_ = unstructured.SetNestedField(u.Object, true, "spec", "evaluation", "generateExisting", "enabled")
			vars, _, _ := unstructured.NestedSlice(u.Object, "spec", "variables")
			for _, v := range vars {
				m := v.(map[string]any)
				m["expression"] = strings.Replace(m["expression"].(string), `"name": "zk-kafka-address"`, `"name": "`+name+`"`, 1)
			}
			_ = unstructured.SetNestedSlice(u.Object, vars, "spec", "variables")
		})
	}
	for i := range policies {
		policy := fmt.Sprintf("GeneratingPolicy/budget-%d", i)
		poll(t, policy+"'s objects written and settled", func(context.Context) (bool, error) {
			return metricValue(t, reg, "sprout_settled_objects", map[string]string{"policy": policy}) == n, nil
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if sent != n*policies {
		t.Errorf("%v creates, want %d", sent, n*policies)
	}
	if most > budget {
		t.Errorf("%v triggers evaluated and not yet applied at once, want at most the budget, %d", most, budget)
	}
	if most < 16 {
		t.Errorf("at most %v triggers evaluated and not yet applied at once, fewer than a first part: the count missed the parts", most)
	}
}

// createColoredNamespaces creates n Namespaces named color-0000 on,
// labelled color=color.
func createColoredNamespaces(t *testing.T, color string, n int) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cfg)
	if err := inParallel(16, n, func(i int) error {
		_, err := kube.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%04d", color, i), Labels: map[string]string{"color": color}}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
