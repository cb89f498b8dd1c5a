package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/sprout-gitops/sprout/deploy"
	"github.com/sprout-gitops/sprout/internal/controlplane"
)

// generatedName is the ConfigMap the benchmark policy generates in every
// red Namespace; the baseline generates the same.
const generatedName = "zk-kafka-address"

var policies = schema.GroupVersionResource{Group: "policies.kyverno.io", Version: "v1", Resource: "generatingpolicies"}

// configMapData is the data the benchmark policy generates.
var configMapData = map[string]string{
	"KAFKA_ADDRESS": "192.168.10.13:9092,192.168.10.14:9092,192.168.10.15:9092",
	"ZK_ADDRESS":    "192.168.10.10:2181,192.168.10.11:2181,192.168.10.12:2181",
}

// cluster is a fresh control plane for one measurement, with an unthrottled
// client and a kubeconfig for the processes under test.
type cluster struct {
	cp         *controlplane.ControlPlane
	config     *rest.Config
	kube       kubernetes.Interface
	dynamic    dynamic.Interface
	dir        string
	kubeconfig string
	// apiServer and etcd are the pids of the control plane's processes,
	// whose CPU time is the cost to the cluster (scenario 9).
	apiServer, etcd int
}

// cpuSeconds is the CPU time kube-apiserver and etcd have spent so far.
func (c *cluster) cpuSeconds() float64 {
	return cpuSeconds(c.apiServer) + cpuSeconds(c.etcd)
}

// newCluster starts a control plane; close stops it.
func newCluster(dir string) (*cluster, error) {
	cp, err := controlplane.Start()
	if err != nil {
		return nil, err
	}
	c := &cluster{cp: cp, dir: dir}
	c.config = rest.CopyConfig(cp.Config)
	c.config.QPS, c.config.Burst = -1, 0 // no client-side rate limit
	c.config.UserAgent = "sprout-bench"
	if c.kube, err = kubernetes.NewForConfig(c.config); err == nil {
		c.dynamic, err = dynamic.NewForConfig(c.config)
	}
	if err != nil {
		_ = cp.Stop()
		return nil, err
	}
	kc, err := cp.Kubeconfig()
	if err != nil {
		_ = cp.Stop()
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	c.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.kubeconfig, kc, 0o600); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	if c.apiServer, c.etcd, err = controlPlanePIDs(cp.Config.Host); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	if err := c.warmCRDs(); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return c, nil
}

// warmCRDs installs the PolicyReport CRDs, as a cluster that runs Kyverno
// has them, so that sprout runs with its reports written, as it does by
// default; then it lists every resource of those and Sprout's CRDs from
// the API server's watch cache once. A fresh API server builds the storage and watch cache
// of a custom resource on its first request and answers lists 429 (retry in
// a second) until the cache is ready: a controller started on a fresh
// cluster would spend a second per CRD waiting, which a cluster in use,
// where the CRDs have long been served, never costs.
func (c *cluster) warmCRDs() error {
	crds, err := deploy.CRDs()
	if err != nil {
		return err
	}
	reports, err := deploy.ReportCRDs()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(c.config, envtest.CRDInstallOptions{CRDs: reports}); err != nil {
		return fmt.Errorf("install the report CRDs: %w", err)
	}
	for _, crd := range append(crds, reports...) {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}
			if _, err := c.dynamic.Resource(gvr).List(context.Background(), metav1.ListOptions{ResourceVersion: "0"}); err != nil {
				return fmt.Errorf("warm %s: %w", gvr, err)
			}
		}
	}
	return nil
}

// controlPlanePIDs finds the kube-apiserver serving host among the machine's
// processes by its --secure-port (envtest does not tell its pid), and the
// etcd behind it by the URL the API server was given.
func controlPlanePIDs(host string) (apiServer, etcd int, err error) {
	u, err := url.Parse(host)
	if err != nil {
		return 0, 0, err
	}
	apiServer, args, err := findProcess("kube-apiserver", "--secure-port="+u.Port())
	if err != nil {
		return 0, 0, err
	}
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
			etcd, _, err = findProcess("etcd", "--listen-client-urls="+v)
			return apiServer, etcd, err
		}
	}
	return 0, 0, fmt.Errorf("kube-apiserver (pid %d) has no --etcd-servers", apiServer)
}

// findProcess returns the pid and arguments of the process running the
// program name with the argument arg.
func findProcess(name, arg string) (int, []string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
		if filepath.Base(args[0]) == name && slices.Contains(args[1:], arg) {
			return pid, args, nil
		}
	}
	return 0, nil, fmt.Errorf("no %s process with %s", name, arg)
}

func (c *cluster) close() {
	if err := c.cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop control plane:", err)
	}
}

// parallel calls fn for 0..n-1 from workers goroutines and returns how long
// all took; the first error stops the handing out of further indexes.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) (time.Duration, error) {
	var next atomic.Int64
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

func namespaceName(prefix string, i int) string { return fmt.Sprintf("%s-%05d", prefix, i) }

// createNamespace creates one Namespace labelled color=red.
func (c *cluster) createNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"color": "red"}}}
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	return err
}

// createNamespaces creates n Namespaces from workers goroutines and returns
// how long all took and how long each Create call took, by index.
func (c *cluster) createNamespaces(ctx context.Context, prefix string, n, workers int) (time.Duration, []time.Duration, error) {
	calls := make([]time.Duration, n)
	d, err := parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		start := time.Now()
		err := c.createNamespace(ctx, namespaceName(prefix, i))
		calls[i] = time.Since(start)
		return err
	})
	return d, calls, err
}

// createNamespacesAt creates Namespaces at perSecond for d and returns
// when each Create call returned, by index.
func (c *cluster) createNamespacesAt(ctx context.Context, prefix string, perSecond float64, d time.Duration) ([]time.Time, error) {
	return createAt(ctx, perSecond, d, func(ctx context.Context, i int) error {
		return c.createNamespace(ctx, namespaceName(prefix, i))
	})
}

// createAt calls create for 0, 1, ... at perSecond for d, each in a
// goroutine of its own so that a slow response never delays the next, and
// returns when each call returned, by index.
func createAt(ctx context.Context, perSecond float64, d time.Duration, create func(ctx context.Context, i int) error) ([]time.Time, error) {
	n := int(perSecond * d.Seconds())
	interval := time.Duration(float64(time.Second) / perSecond)
	returned := make([]time.Time, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			errs[i] = create(ctx, i)
			returned[i] = time.Now()
		})
	}
	wg.Wait()
	return returned, errors.Join(append(errs, ctx.Err())...)
}

// createPolicy creates the benchmark policy: fixtures/zk-kafka-address with
// generateExisting on.
func (c *cluster) createPolicy(ctx context.Context) error {
	obj, err := benchmarkPolicy()
	if err != nil {
		return err
	}
	_, err = c.dynamic.Resource(policies).Create(ctx, obj, metav1.CreateOptions{})
	return err
}

// benchmarkPolicy reads fixtures/zk-kafka-address and turns generateExisting on.
func benchmarkPolicy() (*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(filepath.Join("fixtures", "zk-kafka-address", "policy.yaml"))
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		return nil, fmt.Errorf("fixtures/zk-kafka-address/policy.yaml: %w", err)
	}
	if err := unstructured.SetNestedField(obj.Object, true, "spec", "evaluation", "generateExisting", "enabled"); err != nil {
		return nil, err
	}
	return obj, nil
}

// counter watches ConfigMaps and tells when the last of the expected count
// was seen.
type counter struct {
	mu     sync.Mutex
	seen   map[string]time.Time
	target int
	first  time.Time
	last   time.Time
	done   chan struct{}
	stop   context.CancelFunc
}

// watchGenerated starts counting the ConfigMaps of the benchmark policy,
// one per Namespace.
func (c *cluster) watchGenerated(ctx context.Context, target int) (*counter, error) {
	return c.watchConfigMaps(ctx, target, metav1.ListOptions{FieldSelector: "metadata.name=" + generatedName})
}

// watchConfigMaps starts counting the ConfigMaps that opts select, by
// namespace/name.
func (c *cluster) watchConfigMaps(ctx context.Context, target int, opts metav1.ListOptions) (*counter, error) {
	ctx, stop := context.WithCancel(ctx)
	k := &counter{seen: map[string]time.Time{}, target: target, done: make(chan struct{}), stop: stop}
	f := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector, o.LabelSelector = opts.FieldSelector, opts.LabelSelector
	}))
	inf := f.Core().V1().ConfigMaps().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			k.add(cm.Namespace + "/" + cm.Name)
		}
	}})
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		stop()
		return nil, fmt.Errorf("ConfigMap watch did not sync")
	}
	return k, nil
}

func (k *counter) add(key string) {
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.seen[key]; ok {
		return
	}
	k.seen[key] = now
	k.last = now
	if k.first.IsZero() {
		k.first = k.last
	}
	if len(k.seen) == k.target {
		close(k.done)
	}
}

// wait waits until every expected ConfigMap was seen or timeout passed,
// and returns how many were seen and when the first and last of them were.
func (k *counter) wait(timeout time.Duration) (int, time.Time, time.Time) {
	select {
	case <-k.done:
	case <-time.After(timeout):
	}
	k.stop()
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.seen), k.first, k.last
}

// snapshot is how many ConfigMaps were seen so far, and when the first
// and last of them were.
func (k *counter) snapshot() (int, time.Time, time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.seen), k.first, k.last
}

// count is how many ConfigMaps were seen so far.
func (k *counter) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.seen)
}

// seenAt tells when the ConfigMap namespace/name was first seen.
func (k *counter) seenAt(namespace, name string) (time.Time, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t, ok := k.seen[namespace+"/"+name]
	return t, ok
}
