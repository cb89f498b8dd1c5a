package reconcile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/sources"
)

// exceptionDoc is a PolicyException in namespace ns naming the
// GeneratingPolicy policy, with the match conditions given (none: every
// trigger).
func exceptionDoc(ns, name, policy string, conditions ...string) string {
	doc := fmt.Sprintf(`apiVersion: policies.kyverno.io/v1
kind: PolicyException
metadata:
  name: %s
  namespace: %s
spec:
  policyRefs:
  - {kind: GeneratingPolicy, name: %s}
`, name, ns, policy)
	if len(conditions) > 0 {
		doc += "  matchConditions:\n"
		for i, c := range conditions {
			doc += fmt.Sprintf("  - name: c%d\n    expression: %q\n", i, c)
		}
	}
	return doc
}

// applyException creates or updates a PolicyException in the cluster, and
// deletes it when the test ends.
func applyException(t *testing.T, doc string) {
	t.Helper()
	objs, err := manifest.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	a, err := manifest.NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(context.Background(), objs...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteException(t, objs[0].GetNamespace(), objs[0].GetName()) })
}

func deleteException(t *testing.T, ns, name string) {
	t.Helper()
	err := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.PolicyExceptions).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// waitSkipped waits for the PolicySkipped Event on the policy that names
// every one of the strings.
func waitSkipped(t *testing.T, policy string, contains ...string) {
	t.Helper()
	poll(t, "a PolicySkipped Event naming "+strings.Join(contains, ", "), func(ctx context.Context) (bool, error) {
		return hasEvent(eventsOn(ctx, t, "default", apiv1.GeneratingPolicyKind, policy), reconcile.ReasonPolicySkipped, contains...), nil
	})
}

func withExceptions(namespace string) func(*reconcile.Options) {
	return func(o *reconcile.Options) {
		o.PolicyExceptions = true
		o.ExceptionNamespace = namespace
	}
}

// TestPolicyExceptionsAreOffByDefault: as in Kyverno, an exception counts
// only when exceptions are enabled.
func TestPolicyExceptionsAreOffByDefault(t *testing.T) {
	startController(t)
	tb := newTable(t, "exc-off")
	applyException(t, exceptionDoc("exc-off", "everything", "exc-off"))
	tb.applyPolicy(derivedPolicy("exc-off", "exc-off", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("exc-off") })
	tb.trigger("a", "exc-off", "a1")
	tb.waitFor("the downstream, the exception ignored", "a-out", exists)
}

// TestPolicyExceptionLifecycle: an excepted trigger generates nothing; one
// excepted after it generated keeps its objects, neither pruned nor
// updated; once the exception is gone it generates again.
func TestPolicyExceptionLifecycle(t *testing.T) {
	runController(t, withExceptions(""))
	tb := newTable(t, "exc-life")
	applyException(t, exceptionDoc("exc-life", "legacy", "exc-life", `object.metadata.name.startsWith("legacy")`))
	tb.applyPolicy(derivedPolicy("exc-life", "exc-life", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("exc-life") })

	tb.trigger("legacy-a", "exc-life", "x")
	tb.trigger("b", "exc-life", "b1")
	tb.settle("exc-life", 1)
	tb.waitFor("b's downstream", "b-out", exists)
	if tb.get("legacy-a-out") != nil {
		t.Fatal("an excepted trigger generated its object")
	}
	waitSkipped(t, "exc-life", "ConfigMap exc-life/legacy-a", "exc-life/legacy")

	t.Run("an exception created after generation keeps the objects", func(t *testing.T) {
		applyException(t, exceptionDoc("exc-life", "only-b", "exc-life", `object.metadata.name == "b"`))
		waitSkipped(t, "exc-life", "ConfigMap exc-life/b (PolicyException exc-life/only-b)")
		tb.trigger("b", "exc-life", "b2")
		tb.settle("exc-life", 2)
		cm := tb.get("b-out")
		if cm == nil || cm.Data["from"] != "b1" {
			t.Fatalf("b's downstream %v: want it kept as it was (from b1)", cm)
		}
		deleteException(t, "exc-life", "only-b")
		tb.waitFor("b to generate again once the exception is gone", "b-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["from"] == "b2" })
	})
}

// TestPolicyExceptionNamespace: with an exception namespace, exceptions
// elsewhere do not count.
func TestPolicyExceptionNamespace(t *testing.T) {
	createNamespace(t, "exc-central", nil)
	runController(t, withExceptions("exc-central"))
	tb := newTable(t, "exc-ns")
	applyException(t, exceptionDoc("exc-ns", "elsewhere", "exc-ns", `object.metadata.name == "a"`))
	applyException(t, exceptionDoc("exc-central", "central", "exc-ns", `object.metadata.name == "b"`))
	tb.applyPolicy(derivedPolicy("exc-ns", "exc-ns", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("exc-ns") })
	tb.trigger("a", "exc-ns", "a1")
	tb.waitFor("a's downstream: its exception is outside the namespace", "a-out", exists)
	// After the policy's first sync: b comes to an incremental one, which
	// tells of its skip as a full one does.
	tb.trigger("b", "exc-ns", "b1")
	waitSkipped(t, "exc-ns", "ConfigMap exc-ns/b (PolicyException exc-central/central)")
	if tb.get("b-out") != nil {
		t.Error("the exception in the exception namespace did not except b")
	}
}

// TestBrokenPolicyExceptionHoldsItsPolicy: an exception that does not
// compile fails the triggers of the policy it names, as Kyverno fails the
// policy, with the field named in its Warning Event; their objects are
// kept, and the policy runs again once it is fixed.
func TestBrokenPolicyExceptionHoldsItsPolicy(t *testing.T) {
	runController(t, withExceptions(""))
	tb := newTable(t, "exc-broken")
	tb.applyPolicy(derivedPolicy("exc-broken", "exc-broken", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("exc-broken") })
	tb.trigger("a", "exc-broken", "a1")
	tb.waitFor("a's downstream", "a-out", exists)

	applyException(t, exceptionDoc("exc-broken", "bad", "exc-broken", `object.metadata.name ==`))
	// The Warning Event, which either CRD set shows (Kyverno's status has
	// no room for Sprout's Ready condition).
	poll(t, "the policy's EvaluationFailed Event to name the exception", func(ctx context.Context) (bool, error) {
		return hasEvent(eventsOn(ctx, t, "default", apiv1.GeneratingPolicyKind, "exc-broken"), reconcile.ReasonEvaluationFailed,
			"PolicyException exc-broken/bad", "spec.matchConditions[0].expression"), nil
	})
	tb.trigger("a", "exc-broken", "a2")
	tb.delete("a-out")
	applyException(t, exceptionDoc("exc-broken", "bad", "exc-broken", `object.metadata.name == "z"`))
	tb.waitFor("a to generate again once the exception is fixed", "a-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["from"] == "a2" })
}

// TestPolicyExceptionFromFolder: exceptions come with the policies of a
// folder, and a revision with a broken one is rejected whole.
func TestPolicyExceptionFromFolder(t *testing.T) {
	dir := t.TempDir()
	replaceFile(t, dir, "policy.yaml", derivedPolicy("exc-dir", "exc-dir", "out", "one", true, false)+"---\n"+
		exceptionDoc("exc-dir", "legacy", "exc-dir", `object.metadata.name == "legacy"`))
	logs, _ := runController(t, func(o *reconcile.Options) {
		withExceptions("")(o)
		o.Sources = []sources.Source{sources.NewDirectory(dir, 100*time.Millisecond)}
	})
	policyRecord(t, "exc-dir")
	tb := newTable(t, "exc-dir")
	tb.trigger("legacy", "exc-dir", "x")
	tb.trigger("a", "exc-dir", "a1")
	tb.settle("exc-dir", 1)
	tb.waitFor("a's downstream", "a-out", exists)
	if tb.get("legacy-out") != nil {
		t.Fatal("the folder's exception did not except its trigger")
	}

	replaceFile(t, dir, "broken.yaml", exceptionDoc("exc-dir", "broken", "exc-dir", `object.metadata.name ==`))
	poll(t, "the rejection in the log", func(context.Context) (bool, error) {
		return strings.Contains(logs.String(), "source revision rejected") && strings.Contains(logs.String(), "broken.yaml"), nil
	})
	if !strings.Contains(logs.String(), "PolicyException exc-dir/broken: spec.matchConditions[0].expression") {
		t.Errorf("the rejection does not name the exception and its field:\n%s", logs.String())
	}
	if err := os.Remove(filepath.Join(dir, "broken.yaml")); err != nil {
		t.Fatal(err)
	}
	replaceFile(t, dir, "policy.yaml", derivedPolicy("exc-dir", "exc-dir", "out", "one", true, false))
	tb.waitFor("legacy to generate once the exception is gone from the folder", "legacy-out", exists)
}

// TestPolicyExceptionExpires: past its expiresAt an exception no longer
// counts, and the trigger it skipped generates without another event.
func TestPolicyExceptionExpires(t *testing.T) {
	runController(t, withExceptions(""))
	tb := newTable(t, "exc-expiry")
	expires := time.Now().Add(15 * time.Second).UTC().Format(time.RFC3339)
	applyException(t, exceptionDoc("exc-expiry", "soon", "exc-expiry")+"  expiresAt: "+expires+"\n")
	tb.applyPolicy(derivedPolicy("exc-expiry", "exc-expiry", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("exc-expiry") })
	tb.trigger("a", "exc-expiry", "a1")
	waitSkipped(t, "exc-expiry", "ConfigMap exc-expiry/a (PolicyException exc-expiry/soon)")
	if tb.get("a-out") != nil {
		t.Fatal("the exception did not except a before it expired")
	}
	tb.waitFor("a to generate once the exception expired", "a-out", exists)
}

// TestExceptionValuesReachThePolicy: a PolicyException that names images
// or allowedValues lets its policy run, as in Kyverno, and the policy reads
// them as exceptions.allowedImages and exceptions.allowedValues; for a
// trigger no exception matches, both are empty.
func TestExceptionValuesReachThePolicy(t *testing.T) {
	runController(t, withExceptions(""))
	tb := newTable(t, "exc-values")
	applyException(t, exceptionDoc("exc-values", "sizes", "exc-values", `object.metadata.name == "big"`)+
		"  allowedValues: [large, huge]\n  images: [\"ghcr.io/team/*\"]\n")
	doc := replaceOnce(t, derivedPolicy("exc-values", "exc-values", "out", "one", true, false),
		`"policy": "one"`, `"policy": exceptions.allowedValues.join(",") + "|" + exceptions.allowedImages.join(",")`)
	tb.applyPolicy(doc)
	t.Cleanup(func() { tb.deletePolicy("exc-values") })
	tb.trigger("big", "exc-values", "b")
	tb.trigger("small", "exc-values", "s")
	tb.waitFor("big's object, with what the exception allows", "big-out", func(cm *corev1.ConfigMap) bool {
		return cm != nil && cm.Data["policy"] == "large,huge|ghcr.io/team/*"
	})
	tb.waitFor("small's object, with nothing allowed", "small-out", func(cm *corev1.ConfigMap) bool {
		return cm != nil && cm.Data["policy"] == "|"
	})
}
