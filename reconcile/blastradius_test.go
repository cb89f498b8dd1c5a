package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/reconcile/blast"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// annotated gives a policy document of testpolicies annotations.
func annotated(doc string, annotations map[string]string) string {
	var b strings.Builder
	b.WriteString("  annotations:\n")
	for k, v := range annotations {
		fmt.Fprintf(&b, "    %q: %q\n", k, v)
	}
	i := strings.Index(doc, "metadata:\n  name: ")
	end := i + strings.Index(doc[i:], "\n  name: ") + len("\n  name: ")
	end += strings.Index(doc[end:], "\n") + 1
	return doc[:end] + b.String() + doc[end:]
}

// revisionOf is the content revision of the stored policy name.
func revisionOf(t *testing.T, name string) string {
	t.Helper()
	u, err := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := apiv1.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return blast.Revision(p)
}

// waitHeld waits until the policy says its revision is held, with each
// of want in the message, and, where the CRDs keep it, Stalled.
func waitHeld(t *testing.T, name string, want ...string) {
	t.Helper()
	var msg string
	poll(t, "the revision held: "+strings.Join(want, ", "), func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, name)
		if c == nil || err != nil || c.Reason != report.ReasonBlastRadiusExceeded {
			return false, err
		}
		msg = c.Message
		for _, w := range want {
			if !strings.Contains(c.Message, w) {
				return false, nil
			}
		}
		return true, nil
	})
	if kyvernoCRDs(t) {
		return
	}
	u, err := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := apiv1.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(p.PolicyStatus().Conditions, reconcile.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.Message != msg {
		t.Errorf("Stalled is %+v, want True with %q", c, msg)
	}
}

func holds(key, value string) func(*corev1.ConfigMap) bool {
	return func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data[key] == value }
}

// TestBlastRadiusHoldsRevision: a revision that would overwrite or delete
// more of the policy's objects than its annotation allows writes its
// creations only and is Stalled, saying what would change; an approval of
// the revision, or a threshold that allows it, writes the rest. Drift
// repair of an applied revision is not held.
func TestBlastRadiusHoldsRevision(t *testing.T) {
	startController(t)
	tb := newTable(t, "blast")
	policy := func(suffix, value, radius string, more ...string) string {
		a := map[string]string{blast.AnnotationBlastRadius: radius}
		for i := 0; i+1 < len(more); i += 2 {
			a[more[i]] = more[i+1]
		}
		return annotated(derivedPolicy("blast", "blast", suffix, value, true, false), a)
	}
	tb.applyPolicy(policy("out", "one", "2"))
	t.Cleanup(func() { tb.deletePolicy("blast") })
	for _, n := range []string{"a", "b", "c", "d"} {
		tb.trigger(n, "blast", n)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		tb.waitFor("the first revision's objects", n+"-out", holds("policy", "one"))
	}

	// Four overwrites, more than 2: none written.
	tb.applyPolicy(policy("out", "two", "2"))
	waitHeld(t, "blast", "would delete 0 and overwrite 4 of the policy's 4 objects", "more than its blast radius of 2",
		"ConfigMap/blast/a-out (overwrite)", "sprout approve GeneratingPolicy/blast", revisionOf(t, "blast"))
	for _, n := range []string{"a", "b", "c", "d"} {
		if cm := tb.get(n + "-out"); cm.Data["policy"] != "one" {
			t.Errorf("%s-out was overwritten while held: %v", n, cm.Data)
		}
	}

	// The approval names the revision: it writes them.
	tb.applyPolicy(policy("out", "two", "2", blast.AnnotationApprovedRevision, revisionOf(t, "blast")))
	for _, n := range []string{"a", "b", "c", "d"} {
		tb.waitFor("the approved revision's overwrites", n+"-out", holds("policy", "two"))
	}
	waitReady(t, "blast")

	// Drift repair of the applied revision is not held.
	tb.edit("a-out", "policy", "drifted")
	tb.waitFor("the drift repaired", "a-out", holds("policy", "two"))

	// A new suffix: four creations, written, and four deletions, held.
	tb.applyPolicy(policy("new", "two", "2"))
	waitHeld(t, "blast", "would delete 4 and overwrite 0 of the policy's 4 objects", "ConfigMap/blast/a-out (delete)")
	for _, n := range []string{"a", "b", "c", "d"} {
		tb.waitFor("the held revision's creations", n+"-new", exists)
		if tb.get(n+"-out") == nil {
			t.Errorf("%s-out was deleted while held", n)
		}
	}

	// As a percentage of the objects the policy had at its applied
	// revision: the four the held revision created since do not dilute
	// it, however many syncs it has had (4 of 8 would be 50%).
	tb.applyPolicy(policy("new", "two", "50%"))
	waitHeld(t, "blast", "would delete 4 and overwrite 0 of the policy's 4 objects, more than its blast radius of 50%")
	for _, n := range []string{"a", "b", "c", "d"} {
		if tb.get(n+"-out") == nil {
			t.Errorf("%s-out was deleted under 50%%", n)
		}
	}
	tb.applyPolicy(policy("new", "two", "100%"))
	for _, n := range []string{"a", "b", "c", "d"} {
		tb.waitFor("the deletions the threshold allows", n+"-out", absent)
	}
	waitReady(t, "blast")
}

// TestBlastRadiusFlagAndPlan: the flag's threshold holds a policy without
// the annotation, a bad annotation holds every deletion and overwrite and
// names the field, and a plan (sprout diff) shows what the guard holds.
func TestBlastRadiusFlagAndPlan(t *testing.T) {
	runController(t, func(o *reconcile.Options) { o.BlastRadius = "1" })
	tb := newTable(t, "blast-flag")
	tb.applyPolicy(derivedPolicy("blast-flag", "blast-flag", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("blast-flag") })
	tb.trigger("a", "blast-flag", "a")
	tb.trigger("b", "blast-flag", "b")
	tb.waitFor("the first revision's objects", "b-out", holds("policy", "one"))

	tb.applyPolicy(derivedPolicy("blast-flag", "blast-flag", "out", "two", true, false))
	waitHeld(t, "blast-flag", "would delete 0 and overwrite 2 of the policy's 2 objects, more than its blast radius of 1")

	plan, err := reconcile.New(cfg, func() reconcile.Options {
		o := reconcile.DefaultOptions()
		o.DryRun, o.BlastRadius, o.ResyncSchedule = true, "1", ""
		return o
	}())
	if err != nil {
		t.Fatal(err)
	}
	plans, err := plan.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, p := range plans {
		if p.Policy != "GeneratingPolicy/blast-flag" {
			continue
		}
		found = true
		if !strings.Contains(p.Held, "would delete 0 and overwrite 2 of the policy's 2 objects") || p.Err != nil {
			t.Errorf("plan: held %q, error %v", p.Held, p.Err)
		}
		if n := p.Changes.Count("configured"); n != 2 {
			t.Errorf("plan shows %d overwrites, want the 2 held: %+v", n, p.Changes.Changes)
		}
	}
	if !found {
		t.Error("the policy was not planned")
	}

	tb.applyPolicy(annotated(derivedPolicy("blast-flag", "blast-flag", "out", "two", true, false), map[string]string{blast.AnnotationBlastRadius: "lots"}))
	waitHeld(t, "blast-flag", `metadata.annotations[sprout.dev/blast-radius]: "lots" is not a count (10), a percentage (20%) or off`)
	if cm := tb.get("a-out"); cm.Data["policy"] != "one" {
		t.Errorf("a-out was overwritten under a bad annotation: %v", cm.Data)
	}
	tb.applyPolicy(annotated(derivedPolicy("blast-flag", "blast-flag", "out", "two", true, false), map[string]string{blast.AnnotationBlastRadius: "off"}))
	tb.waitFor("the revision written with the guard off", "a-out", holds("policy", "two"))
}

// TestBlastRadiusHeldAcrossRestart: the revision a policy's objects were
// synced to is in its record, so a revision held when Sprout stops is
// still held by the Sprout that starts next, and one that changed while
// Sprout was stopped is held too.
func TestBlastRadiusHeldAcrossRestart(t *testing.T) {
	opts := reconcile.DefaultOptions()
	opts.BlastRadius = "0"
	_, stop := launchController(t, cfg, opts)
	tb := newTable(t, "blast-restart")
	tb.applyPolicy(derivedPolicy("blast-restart", "blast-restart", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("blast-restart") })
	tb.trigger("a", "blast-restart", "a")
	tb.waitFor("the first revision's object", "a-out", holds("policy", "one"))
	tb.applyPolicy(derivedPolicy("blast-restart", "blast-restart", "out", "two", true, false))
	waitHeld(t, "blast-restart", "would delete 0 and overwrite 1 of the policy's 1 objects")
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	tb.applyPolicy(derivedPolicy("blast-restart", "blast-restart", "out", "three", true, false))
	runController(t, func(o *reconcile.Options) { o.BlastRadius = "0" })
	waitHeld(t, "blast-restart", "revision "+revisionOf(t, "blast-restart")+" would delete 0 and overwrite 1")
	if cm := tb.get("a-out"); cm.Data["policy"] != "one" {
		t.Errorf("after a restart, a-out was overwritten: %v", cm.Data)
	}
}
