package reconcile_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/internal/syncbuf"
	"github.com/sprout-gitops/sprout/reconcile"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	if err := onlyCRDDependentTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	controlplane.Main(m, &cfg)
}

// startController runs a controller until the test ends and returns its log.
func startController(t *testing.T) *syncbuf.Buffer {
	t.Helper()
	logs, _ := runController(t, nil)
	return logs
}

// runController runs a controller, with options changed by edit, until the
// test ends; its log is shown when the test fails.
func runController(t *testing.T, edit func(*reconcile.Options)) (*syncbuf.Buffer, *reconcile.Controller) {
	t.Helper()
	return runControllerOn(t, cfg, edit)
}

// runControllerOn is runController through config.
func runControllerOn(t *testing.T, config *rest.Config, edit func(*reconcile.Options)) (*syncbuf.Buffer, *reconcile.Controller) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	opts := reconcile.DefaultOptions()
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	if edit != nil {
		edit(&opts)
	}
	c, stop := launchController(t, config, opts)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("controller: %v", err)
		}
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	return logs, c
}

// testProofKey is the key every controller of the tests signs with, the
// same across a test's restarts, as a key read from the cluster is.
var testProofKey = []byte("sprout-test-proof-key-32-bytes-!")

// launchController runs a controller through config with opts; stop ends
// it and returns what its Run returned.
func launchController(t *testing.T, config *rest.Config, opts reconcile.Options) (c *reconcile.Controller, stop func() error) {
	t.Helper()
	if opts.ProofKey == nil && opts.Identify == nil { // Identify gives it
		opts.ProofKey = testProofKey
	}
	c, err := reconcile.New(config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return c, func() error {
		cancel()
		return <-done
	}
}

func applyFixture(t *testing.T, scenario, file string, edit func(*unstructured.Unstructured)) {
	t.Helper()
	objs, err := fixtures.Objects(scenario, file)
	if err != nil {
		t.Fatal(err)
	}
	a, err := manifest.NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if edit != nil {
			edit(o)
		}
		if err := a.Apply(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		if o.GetKind() == apiv1.GeneratingPolicyKind {
			t.Cleanup(func() {
				r, err := a.Resource(o)
				if err == nil {
					err = r.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
				}
				if err != nil && !apierrors.IsNotFound(err) { // deleted by the test
					t.Errorf("delete policy %s: %v", o.GetName(), err)
				}
			})
		}
	}
}

// applyColorPolicy applies the zk-kafka-address policy as name, selecting
// Namespaces labelled color=<color>, so tests sharing the control plane do
// not select each other's Namespaces.
func applyColorPolicy(t *testing.T, name, color string, edit func(*unstructured.Unstructured)) {
	t.Helper()
	applyFixture(t, "zk-kafka-address", "policy.yaml", func(u *unstructured.Unstructured) {
		u.SetName(name)
		conds, _, _ := unstructured.NestedSlice(u.Object, "spec", "matchConditions")
		c := conds[0].(map[string]any)
		c["expression"] = strings.Replace(c["expression"].(string), "'red'", "'"+color+"'", 1)
		_ = unstructured.SetNestedSlice(u.Object, conds, "spec", "matchConditions")
		if edit != nil {
			edit(u)
		}
	})
}

// notFoundIsNil lets a poll wait for an object that is not there yet.
func notFoundIsNil(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// poll waits, with a bound, until cond holds.
func poll(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func createNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cfg)
	_, err := kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func getConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	cm, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cm, err
}

// policyCondition returns the Ready condition of a GeneratingPolicy.
func policyCondition(ctx context.Context, name string) (*metav1.Condition, error) {
	return readyCondition(ctx, dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies), name)
}

// namespacedPolicyCondition returns the Ready condition of a
// NamespacedGeneratingPolicy.
func namespacedPolicyCondition(ctx context.Context, ns, name string) (*metav1.Condition, error) {
	return readyCondition(ctx, dynamic.NewForConfigOrDie(cfg).Resource(apiv1.NamespacedGeneratingPolicies).Namespace(ns), name)
}

func readyCondition(ctx context.Context, policies dynamic.ResourceInterface, name string) (*metav1.Condition, error) {
	u, err := policies.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	p, err := apiv1.FromUnstructured(u)
	if err != nil {
		return nil, err
	}
	return readyOf(p), nil
}

func TestDataSourcePolicyGeneratesForNewMatchingNamespaces(t *testing.T) {
	startController(t)
	applyFixture(t, "zk-kafka-address", "policy.yaml", nil)
	poll(t, "policy Ready", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "zk-kafka-address")
		return c != nil && c.Status == metav1.ConditionTrue, err
	})

	// blue first: when red's ConfigMap exists, a sync has seen both.
	createNamespace(t, "dsp-blue", map[string]string{"color": "blue"})
	createNamespace(t, "dsp-red", map[string]string{"color": "red"})

	var cm *corev1.ConfigMap
	poll(t, "ConfigMap in dsp-red", func(ctx context.Context) (done bool, err error) {
		cm, err = getConfigMap(ctx, "dsp-red", "zk-kafka-address")
		return cm != nil, err
	})
	if got := cm.Data["ZK_ADDRESS"]; got != "192.168.10.10:2181,192.168.10.11:2181,192.168.10.12:2181" {
		t.Errorf("ZK_ADDRESS = %q", got)
	}
	red, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Get(context.Background(), "dsp-red", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		sproutv1alpha1.LabelManagedBy:        sproutv1alpha1.ManagedBy,
		sproutv1alpha1.LabelPolicyName:       "zk-kafka-address",
		sproutv1alpha1.LabelTriggerName:      "dsp-red",
		sproutv1alpha1.LabelTriggerNamespace: "",
		sproutv1alpha1.LabelTriggerUID:       string(red.UID),
		sproutv1alpha1.LabelTriggerKind:      "Namespace",
		sproutv1alpha1.LabelTriggerGroup:     "",
		sproutv1alpha1.LabelTriggerVersion:   "v1",
	}
	for k, v := range wantLabels {
		if got, ok := cm.Labels[k]; !ok || got != v {
			t.Errorf("label %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	blue, err := getConfigMap(context.Background(), "dsp-blue", "zk-kafka-address")
	if err != nil {
		t.Fatal(err)
	}
	if blue != nil {
		t.Error("a Namespace without color=red got a ConfigMap")
	}
	poll(t, "policy status counts the trigger", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "zk-kafka-address")
		return c != nil && c.Message == "1 trigger, 1 object", err
	})
}

func TestGenerateExistingRecomputesFromTheCache(t *testing.T) {
	// The Namespace exists before the policy: only generateExisting admits it,
	// and only a sync that reads the cache (no event names it) can find it.
	createNamespace(t, "gex-red", map[string]string{"color": "gex"})
	startController(t)
	applyColorPolicy(t, "zk-kafka-address-existing", "gex", func(u *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(u.Object, true, "spec", "evaluation", "generateExisting", "enabled"); err != nil {
			t.Fatal(err)
		}
		gen, _, _ := unstructured.NestedSlice(u.Object, "spec", "variables")
		cmVar := gen[1].(map[string]any)
		cmVar["expression"] = strings.Replace(cmVar["expression"].(string), `"name": "zk-kafka-address"`, `"name": "existing"`, 1)
		_ = unstructured.SetNestedSlice(u.Object, gen, "spec", "variables")
	})
	poll(t, "ConfigMap for the existing Namespace", func(ctx context.Context) (bool, error) {
		cm, err := getConfigMap(ctx, "gex-red", "existing")
		return cm != nil, err
	})
}

func TestBrokenPolicyIsReportedAndOthersKeepWorking(t *testing.T) {
	logs := startController(t)
	applyFixture(t, "broken-variable", "policy.yaml", nil)
	applyColorPolicy(t, "zk-kafka-next-to-broken", "broken", nil)

	poll(t, "broken policy reported", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "broken-variable")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reconcile.ReasonCompileFailed, err
	})
	c, err := policyCondition(context.Background(), "broken-variable")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.Message, "spec.variables[1].expression") {
		t.Errorf("condition message %q does not name the field path", c.Message)
	}
	poll(t, "the error on the policy's record", func(ctx context.Context) (bool, error) {
		rec, err := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories).Get(ctx, "gpol.broken-variable", metav1.GetOptions{})
		if err != nil {
			return false, notFoundIsNil(err)
		}
		// Ready, and Stalled with the same message (kstatus).
		conds, _, _ := unstructured.NestedSlice(rec.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Ready" && strings.Contains(fmt.Sprint(m["message"]), "spec.variables[1].expression") {
				return true, nil
			}
		}
		return false, nil
	})
	log := logs.String()
	for _, want := range []string{"GeneratingPolicy/broken-variable", "spec.variables[1].expression"} {
		if !strings.Contains(log, want) {
			t.Errorf("log does not contain %q:\n%s", want, log)
		}
	}

	createNamespace(t, "broken-red", map[string]string{"color": "broken"})
	poll(t, "the other policy still generates", func(ctx context.Context) (bool, error) {
		cm, err := getConfigMap(ctx, "broken-red", "zk-kafka-address")
		if cm != nil && cm.Labels[sproutv1alpha1.LabelPolicyName] != "zk-kafka-next-to-broken" {
			return false, fmt.Errorf("unexpected owner %q", cm.Labels[sproutv1alpha1.LabelPolicyName])
		}
		return cm != nil, err
	})
}
