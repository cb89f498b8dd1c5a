package reconcile_test

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/sprout-gitops/sprout/reconcile"
)

// TestConnectOnlyRuleNeverFires: CONNECT is only seen by webhooks; a rule
// listing only it is reported on the policy and generates nothing, even
// with generateExisting.
func TestConnectOnlyRuleNeverFires(t *testing.T) {
	startController(t)
	tb := newTable(t, "connect")
	tb.trigger("a", "connect", "a1")
	doc := derivedPolicy("connect", "connect", "out", "one", true, false)
	doc = replaceOnce(t, doc, `operations: ["CREATE", "UPDATE"]`, `operations: ["CONNECT"]`)
	doc = generatingExisting(doc)
	tb.applyPolicy(doc)
	t.Cleanup(func() { tb.deletePolicy("connect") })
	poll(t, "the unobservable rule on the policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "connect")
		return c != nil && c.Reason == reconcile.ReasonUnobservableTrigger &&
			strings.Contains(c.Message, "spec.matchConstraints.resourceRules[0]: operation CONNECT is only seen by admission webhooks"), err
	})
	tb.settleWith(derivedPolicy("connect-marker", "connect", "marker", "m", true, false), "a-marker")
	t.Cleanup(func() { tb.deletePolicy("connect-marker") })
	if tb.get("a-out") != nil {
		t.Error("a CONNECT-only rule generated for an existing object")
	}
}

// TestTriggerKindInstalledAfterThePolicy: a policy whose trigger kind is
// not served yet says so, and starts watching it once its CRD is installed
// (found at the next resync).
func TestTriggerKindInstalledAfterThePolicy(t *testing.T) {
	runController(t, func(o *reconcile.Options) { o.ResyncSchedule = "@every 1s" })
	tb := newTable(t, "late-crd")
	doc := derivedPolicy("late-crd", "late-crd", "out", "one", true, false)
	doc = replaceOnce(t, doc, `- apiGroups: [""]`, `- apiGroups: ["late.sprout.dev"]`)
	doc = replaceOnce(t, doc, `resources: ["configmaps"]`, `resources: ["gadgets"]`)
	tb.applyPolicy(doc)
	t.Cleanup(func() { tb.deletePolicy("late-crd") })
	poll(t, "the unserved kind on the policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "late-crd")
		return c != nil && c.Reason == reconcile.ReasonUnobservableTrigger && strings.Contains(c.Message, "no served resource matches"), err
	})

	installCRD(t, "late.sprout.dev", "Gadget", &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)})
	gadgets := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "late.sprout.dev", Version: "v1", Resource: "gadgets"}).Namespace("late-crd")
	gadget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "late.sprout.dev/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "g", "labels": map[string]any{"app": "late-crd"}},
		"data":     map[string]any{"value": "g1"},
	}}
	poll(t, "the CRD to serve", func(ctx context.Context) (bool, error) {
		_, err := gadgets.Create(ctx, gadget, metav1.CreateOptions{})
		return err == nil, nil
	})
	tb.waitFor("the downstream of a trigger whose kind came later", "g-out", exists)
}

func ptrTo[T any](v T) *T { return &v }
