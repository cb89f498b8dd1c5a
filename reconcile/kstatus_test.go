package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/reconcile"
)

// health is what the three readers of a policy's status make of it: kstatus
// (Flux's health checks, `kubectl wait`) on the policy and on its record,
// and Argo CD's built-in health check of GeneratingPolicy.
type health struct {
	// record is empty when the policy has no record: one that never
	// got as far as its first write has none.
	policy, record status.Status
	argo           string
}

// healthOf reads policy name and its record from the control plane as
// Sprout left them and computes their health.
func healthOf(ctx context.Context, name string) (health, string, error) {
	client := dynamic.NewForConfigOrDie(cfg)
	p, err := client.Resource(apiv1.GeneratingPolicies).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return health{}, "", err
	}
	pr, err := status.Compute(p)
	if err != nil {
		return health{}, "", err
	}
	rr := &status.Result{Status: "", Message: "no record"}
	rec, err := client.Resource(sproutv1alpha1.PolicyInventories).Get(ctx, "gpol."+name, metav1.GetOptions{})
	if err == nil {
		rr, err = status.Compute(rec)
	}
	if notFoundIsNil(err) != nil {
		return health{}, "", err
	}
	argo, argoMessage := argoHealth(p)
	return health{policy: pr.Status, record: rr.Status, argo: argo}, fmt.Sprintf("kstatus %q, record %q, Argo CD %q", pr.Message, rr.Message, argoMessage), nil
}

// argoHealth is Argo CD's built-in health check of policies.kyverno.io
// GeneratingPolicy (argo-cd resource_customizations, added by
// argoproj/argo-cd#27354) as docs/health.md describes it: Progressing while
// a condition of status.conditionStatus is of an older generation or there
// is no conditionStatus, then Healthy when conditionStatus.ready is true,
// Degraded otherwise, with the message of the first False condition.
func argoHealth(u *unstructured.Unstructured) (string, string) {
	cs, ok, _ := unstructured.NestedMap(u.Object, "status", "conditionStatus")
	if !ok {
		return "Progressing", "Waiting for GeneratingPolicy status"
	}
	conds, _, _ := unstructured.NestedSlice(cs, "conditions")
	for _, c := range conds {
		if g, ok := c.(map[string]any)["observedGeneration"].(int64); ok && g < u.GetGeneration() {
			return "Progressing", "Waiting for GeneratingPolicy status to reflect latest generation"
		}
	}
	if ready, _, _ := unstructured.NestedBool(cs, "ready"); ready {
		return "Healthy", ""
	}
	for _, c := range conds {
		if c := c.(map[string]any); c["status"] == "False" {
			return "Degraded", fmt.Sprintf("%s: %s", c["type"], c["message"])
		}
	}
	return "Degraded", "Policy is not ready"
}

// kyvernoCRDs reports whether the test control plane runs Kyverno's policy
// CRDs, which keep neither status.conditions nor status.observedGeneration:
// kstatus then finds nothing on the policy and calls it Current.
func kyvernoCRDs(t *testing.T) bool {
	set, err := controlplane.CRDsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	return set == controlplane.KyvernoCRDs
}

// waitHealth waits until policy name reads as want, the policy's own
// kstatus excepted under Kyverno's CRDs, where it is always Current.
func waitHealth(t *testing.T, name string, want health) {
	t.Helper()
	if kyvernoCRDs(t) {
		want.policy = status.CurrentStatus
	}
	var got health
	var why string
	err := pollErr(func(ctx context.Context) (bool, error) {
		var err error
		got, why, err = healthOf(ctx, name)
		return got == want, err
	})
	if err != nil {
		t.Fatalf("policy %s: health %+v (%s), want %+v: %v", name, got, why, want, err)
	}
}

// TestKstatusOfPolicies: every state of a policy reads right to kstatus's
// own Compute and to Argo CD's health check, on the policy and its record
// as Sprout wrote them: Current when it is done, InProgress while a
// failure is retried, Failed when only a change can lift it (a compile
// error, a missing permission, a suspension).
func TestKstatusOfPolicies(t *testing.T) {
	runController(t, func(o *reconcile.Options) { o.ServiceAccountNamespaces = []string{"kstatus"} })
	tb := newTable(t, "kstatus")
	apply := func(name, doc string) {
		t.Helper()
		tb.applyPolicy(doc)
		t.Cleanup(func() { tb.deletePolicy(name) })
	}

	apply("ks-ready", derivedPolicy("ks-ready", "ks-ready", "out", "one", true, false))
	tb.trigger("a", "ks-ready", "a1")
	tb.waitFor("the policy's object", "a-out", exists)
	waitHealth(t, "ks-ready", health{policy: status.CurrentStatus, record: status.CurrentStatus, argo: "Healthy"})

	broken := replaceOnce(t, derivedPolicy("ks-broken", "ks-broken", "out", "one", true, false), "generator.Apply(", "generator.Apply(no_such_variable, ")
	apply("ks-broken", broken)
	waitHealth(t, "ks-broken", health{policy: status.FailedStatus, record: status.FailedStatus, argo: "Degraded"})

	// An evaluation that fails for one trigger is retried: in progress. Its
	// other triggers were generated, so Kyverno's ready, which Argo CD
	// reads, stays true.
	failing := replaceOnce(t, derivedPolicy("ks-retry", "ks-retry", "out", "one", true, false),
		`object.data.?value.orValue("")`, `string(int(object.data.value))`)
	apply("ks-retry", failing)
	tb.trigger("r", "ks-retry", "not a number")
	waitHealth(t, "ks-retry", health{policy: status.InProgressStatus, record: status.InProgressStatus, argo: "Healthy"})

	// An account that may not read the triggers waits for RBAC to change.
	if _, err := tb.kube.CoreV1().ServiceAccounts(tb.ns).Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	denied := replaceOnce(t, derivedPolicy("ks-denied", "ks-denied", "out", "one", true, false),
		"  name: ks-denied\n", "  name: ks-denied\n  annotations: {\"sprout.dev/service-account\": \"kstatus/nobody\"}\n")
	apply("ks-denied", denied)
	waitHealth(t, "ks-denied", health{policy: status.FailedStatus, argo: "Degraded"})

	patchPolicy(t, "ks-ready", fmt.Sprintf(`{"metadata": {"annotations": {%q: "true"}}}`, reconcile.AnnotationSuspend))
	waitHealth(t, "ks-ready", health{policy: status.FailedStatus, record: status.FailedStatus, argo: "Degraded"})
}

// TestKyvernoMessageGoesWithTheFailure: Kyverno's conditionStatus.message
// says what keeps a policy from being ready; once it is ready again, the
// message is gone from the policy as the server holds it. A merge patch
// leaves a field it does not name as it was, so the message must be
// removed in so many words, or it stays, and every later report writes
// the status again to remove it.
func TestKyvernoMessageGoesWithTheFailure(t *testing.T) {
	runController(t, nil)
	tb := newTable(t, "ks-heal")
	doc := derivedPolicy("ks-heal", "ks-heal", "out", "one", true, false)
	tb.applyPolicy(replaceOnce(t, doc, "generator.Apply(", "generator.Apply(no_such_variable, "))
	t.Cleanup(func() { tb.deletePolicy("ks-heal") })
	message := func() (string, bool) {
		t.Helper()
		p, err := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies).Get(context.Background(), "ks-heal", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m, ok, _ := unstructured.NestedString(p.Object, "status", "conditionStatus", "message")
		return m, ok
	}
	waitHealth(t, "ks-heal", health{policy: status.FailedStatus, record: status.FailedStatus, argo: "Degraded"})
	if m, _ := message(); !strings.Contains(m, "no_such_variable") {
		t.Fatalf("a policy that does not compile: conditionStatus.message %q, want it to name the error", m)
	}

	tb.applyPolicy(doc)
	tb.trigger("a", "ks-heal", "a1")
	tb.waitFor("the policy's object", "a-out", exists)
	waitHealth(t, "ks-heal", health{policy: status.CurrentStatus, record: status.CurrentStatus, argo: "Healthy"})
	if m, ok := message(); ok {
		t.Errorf("a policy ready again: conditionStatus.message %q, want none", m)
	}
}

// TestKstatusWhileAGenerationIsApplied: while a sync applies a new
// generation, the policy says Reconciling, and kstatus reads it in
// progress; once applied, it is current.
func TestKstatusWhileAGenerationIsApplied(t *testing.T) {
	if kyvernoCRDs(t) {
		t.Skip("Kyverno's CRDs keep no Reconciling condition")
	}
	gate := &writeGate{path: "/namespaces/ks-gen/configmaps", held: make(chan struct{})}
	gated := rest.CopyConfig(cfg)
	gated.Wrap(func(rt http.RoundTripper) http.RoundTripper { gate.next = rt; return gate })
	runControllerOn(t, gated, nil)
	t.Cleanup(gate.open) // before the controller stops: cleanups run last first
	tb := newTable(t, "ks-gen")
	// The trigger is older than the policy: generateExisting admits it
	// whichever second each was created in.
	tb.trigger("a", "ks-gen", "a1")
	tb.applyPolicy(generatingExisting(derivedPolicy("ks-gen", "ks-gen", "out", "one", true, false)))
	t.Cleanup(func() { tb.deletePolicy("ks-gen") })
	poll(t, "Reconciling on the policy whose objects are being written", func(ctx context.Context) (bool, error) {
		u, err := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies).Get(ctx, "ks-gen", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		res, err := status.Compute(u)
		return err == nil && res.Status == status.InProgressStatus && strings.Contains(res.Message, "applying generation 1"), err
	})
	gate.open()
	tb.waitFor("the policy's object", "a-out", exists)
	waitHealth(t, "ks-gen", health{policy: status.CurrentStatus, record: status.CurrentStatus, argo: "Healthy"})
}

// writeGate holds every write whose path contains path until open.
type writeGate struct {
	next   http.RoundTripper
	path   string
	held   chan struct{}
	closer sync.Once
}

func (g *writeGate) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && strings.Contains(req.URL.Path, g.path) {
		select {
		case <-g.held:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return g.next.RoundTrip(req)
}

func (g *writeGate) open() { g.closer.Do(func() { close(g.held) }) }

// pollErr waits, with poll's bound, until cond holds.
func pollErr(cond func(context.Context) (bool, error)) error {
	return wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, cond)
}

// patchPolicy merges patch into GeneratingPolicy name.
func patchPolicy(t *testing.T, name, patch string) {
	t.Helper()
	_, err := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
}
