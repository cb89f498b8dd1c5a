// Command baseline is the yardstick of Sprout's benchmarks (issue #10): the
// fastest obvious controller dedicated to the benchmark policy's job. It keeps
// one fixed ConfigMap, applied with server-side apply, in every Namespace
// that carries a label; no CEL, no policy, no inventory record. A ConfigMap
// already right in its label-selected cache costs no request, so a restart
// writes nothing, as Sprout promises.
//
// It is the sample-controller loop and no more: informers enqueue Namespace
// names, --workers goroutines sync them. With --triggers configmaps it does
// the job of fixtures/configmap-copy instead: a copy named <name>-out beside
// every ConfigMap the selector selects, its informer listing only those.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

const (
	fieldManager = "baseline"
	// managedLabel marks the ConfigMaps the baseline owns; its ConfigMap
	// informer sees only those.
	managedLabel = "app.kubernetes.io/managed-by"
	managedBy    = "sprout-baseline"
)

// data is what every generated ConfigMap holds: the benchmark policy's
// (fixtures/zk-kafka-address).
var data = map[string]string{
	"KAFKA_ADDRESS": "192.168.10.13:9092,192.168.10.14:9092,192.168.10.15:9092",
	"ZK_ADDRESS":    "192.168.10.10:2181,192.168.10.11:2181,192.168.10.12:2181",
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to the kubeconfig file")
	workers := flag.Int("workers", 16, "how many Namespaces are synced at once")
	qps := flag.Float64("kube-api-qps", 200, "the most requests per second sent to the API server")
	burst := flag.Int("kube-api-burst", 400, "the most requests sent at once above --kube-api-qps")
	selector := flag.String("selector", "color=red", "the label selector of the Namespaces that get a ConfigMap")
	name := flag.String("name", "zk-kafka-address", "the name of the generated ConfigMap")
	triggers := flag.String("triggers", "namespaces", "the trigger kind: namespaces (one ConfigMap each) or configmaps (a copy of each)")
	flag.Parse()
	if *triggers != "namespaces" && *triggers != "configmaps" {
		fmt.Fprintln(os.Stderr, "--triggers: namespaces or configmaps, not", *triggers)
		os.Exit(2)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent = float32(*qps), *burst, "sprout-baseline"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := newController(kube, *selector, *name)
	if *triggers == "configmaps" {
		c = newCopyController(kube, *selector)
	}
	if err := c.run(ctx, *workers); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// controller keeps one ConfigMap in every selected Namespace, or a copy
// beside every selected ConfigMap.
type controller struct {
	kube kubernetes.Interface
	name string
	// triggers lists the selected ConfigMaps when they are the triggers.
	triggers   listersv1.ConfigMapLister
	namespaces listersv1.NamespaceLister
	configMaps listersv1.ConfigMapLister
	factories  []informers.SharedInformerFactory
	synced     []cache.DoneChecker
	queue      workqueue.TypedRateLimitingInterface[string]
}

// newController wires the informers' handlers to the queue.
func newController(kube kubernetes.Interface, selector, name string) *controller {
	nsFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	cmFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managedLabel + "=" + managedBy }))
	ns := nsFactory.Core().V1().Namespaces()
	cm := cmFactory.Core().V1().ConfigMaps()
	c := &controller{
		kube:       kube,
		name:       name,
		namespaces: ns.Lister(),
		configMaps: cm.Lister(),
		factories:  []informers.SharedInformerFactory{nsFactory, cmFactory},
		synced:     []cache.DoneChecker{ns.Informer().HasSyncedChecker(), cm.Informer().HasSyncedChecker()},
		queue:      workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	enqueue := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			c.queue.Add(o.Name)
		case *corev1.ConfigMap:
			c.queue.Add(o.Namespace)
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
	_, _ = ns.Informer().AddEventHandler(handler)
	_, _ = cm.Informer().AddEventHandler(handler)
	return c
}

// run starts the informers, waits for their caches and runs workers until
// ctx ends. It waits without polling (WaitForCacheSync looks every 100 ms),
// as Sprout does.
func (c *controller) run(ctx context.Context, workers int) error {
	defer c.queue.ShutDown()
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	if !cache.WaitFor(ctx, "", c.synced...) {
		return fmt.Errorf("caches did not sync")
	}
	fmt.Fprintln(os.Stderr, "baseline: caches synced")
	for range workers {
		go func() {
			for c.processNextWorkItem(ctx) {
			}
		}()
	}
	<-ctx.Done()
	return nil
}

// processNextWorkItem syncs one Namespace; a failure is retried with back-off.
func (c *controller) processNextWorkItem(ctx context.Context) bool {
	ns, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(ns)
	sync := c.sync
	if c.triggers != nil {
		sync = c.syncCopy
	}
	if err := sync(ctx, ns); err != nil {
		utilruntime.HandleError(fmt.Errorf("namespace %s: %w", ns, err))
		c.queue.AddRateLimited(ns)
		return true
	}
	c.queue.Forget(ns)
	return true
}

// sync applies the ConfigMap into the Namespace unless the cache shows it
// already right.
func (c *controller) sync(ctx context.Context, ns string) error {
	namespace, err := c.namespaces.Get(ns)
	if apierrors.IsNotFound(err) || (err == nil && namespace.DeletionTimestamp != nil) {
		return nil
	}
	if err != nil {
		return err
	}
	cm, err := c.configMaps.ConfigMaps(ns).Get(c.name)
	if err == nil && maps.Equal(cm.Data, data) {
		return nil
	}
	apply := corev1ac.ConfigMap(c.name, ns).
		WithLabels(map[string]string{managedLabel: managedBy}).
		WithData(data)
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = c.kube.CoreV1().ConfigMaps(ns).Apply(callCtx, apply, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	return err
}

// copySuffix ends the name of a trigger ConfigMap's copy.
const copySuffix = "-out"

// newCopyController wires the informers of the configmaps mode: the
// selected ConfigMaps, and the copies, both queue the trigger's key.
func newCopyController(kube kubernetes.Interface, selector string) *controller {
	trigFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	cmFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managedLabel + "=" + managedBy }))
	trig := trigFactory.Core().V1().ConfigMaps()
	cm := cmFactory.Core().V1().ConfigMaps()
	c := &controller{
		kube:       kube,
		triggers:   trig.Lister(),
		configMaps: cm.Lister(),
		factories:  []informers.SharedInformerFactory{trigFactory, cmFactory},
		synced:     []cache.DoneChecker{trig.Informer().HasSyncedChecker(), cm.Informer().HasSyncedChecker()},
		queue:      workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	enqueue := func(suffix string) func(obj any) {
		return func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o, ok := obj.(*corev1.ConfigMap); ok {
				c.queue.Add(o.Namespace + "/" + strings.TrimSuffix(o.Name, suffix))
			}
		}
	}
	for inf, suffix := range map[cache.SharedIndexInformer]string{trig.Informer(): "", cm.Informer(): copySuffix} {
		add := enqueue(suffix)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }, DeleteFunc: add})
	}
	return c
}

// syncCopy applies the copy of the trigger ConfigMap key (namespace/name)
// unless the cache shows it already right.
func (c *controller) syncCopy(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	trigger, err := c.triggers.ConfigMaps(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && trigger.DeletionTimestamp != nil) {
		return nil
	}
	if err != nil {
		return err
	}
	want := map[string]string{"source": name}
	cm, err := c.configMaps.ConfigMaps(ns).Get(name + copySuffix)
	if err == nil && maps.Equal(cm.Data, want) {
		return nil
	}
	apply := corev1ac.ConfigMap(name+copySuffix, ns).
		WithLabels(map[string]string{managedLabel: managedBy, "role": "copy"}).
		WithData(want)
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = c.kube.CoreV1().ConfigMaps(ns).Apply(callCtx, apply, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	return err
}
