package reconcile_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/internal/manifest"
)

// The tests TestConformance* follow scenarios of Kyverno's own conformance
// suite for generating policies (test/conformance/chainsaw/generating-policies
// in kyverno/kyverno), step by step, with the scenario's policy as Kyverno
// has it (#46), in testdata/conformance under the scenario's path. Where a chainsaw step sleeps before asserting an absence or
// a survival, these wait instead for a later event to be synced: a marker
// trigger's object, or the deleted policy's record to go. The permissions
// Kyverno's background controller needs are left out: Sprout runs cluster
// policies with its own rights.

// conformance is a running scenario: a controller and the objects applied.
type conformance struct {
	t     *testing.T
	apply *manifest.Applier
}

func newConformance(t *testing.T) *conformance {
	t.Helper()
	startController(t)
	return conformanceClient(t)
}

// conformanceClient is a scenario on whatever controller the test runs.
func conformanceClient(t *testing.T) *conformance {
	t.Helper()
	a, err := manifest.NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &conformance{t: t, apply: a}
}

// create applies every object of doc, as a chainsaw apply step does; a
// policy is deleted when the test ends, unless the test deleted it.
func (c *conformance) create(doc string) {
	c.t.Helper()
	objs, err := manifest.Parse([]byte(doc))
	if err != nil {
		c.t.Fatal(err)
	}
	for _, o := range objs {
		if err := c.apply.Apply(context.Background(), o); err != nil {
			c.t.Fatal(err)
		}
		if o.GetKind() == apiv1.GeneratingPolicyKind || o.GetKind() == "NamespacedGeneratingPolicy" {
			r := ref{o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName()}
			c.t.Cleanup(func() {
				if err := c.resource(r).Delete(context.Background(), r.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					c.t.Errorf("delete policy %s: %v", r.name, err)
				}
			})
		}
	}
}

// policy is the policy of the Kyverno scenario at path (under
// test/conformance/chainsaw), as testdata/conformance holds it.
func (c *conformance) policy(path string) string {
	c.t.Helper()
	doc, err := os.ReadFile(filepath.Join("testdata", "conformance", filepath.FromSlash(path)+".yaml"))
	if err != nil {
		c.t.Fatal(err)
	}
	return string(doc)
}

// ref names one object, as a chainsaw delete or assert step does.
type ref struct{ apiVersion, kind, namespace, name string }

func secretRef(ns, name string) ref    { return ref{"v1", "Secret", ns, name} }
func configMapRef(ns, name string) ref { return ref{"v1", "ConfigMap", ns, name} }

func (c *conformance) resource(r ref) dynamic.ResourceInterface {
	c.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(r.apiVersion)
	u.SetKind(r.kind)
	u.SetNamespace(r.namespace)
	res, err := c.apply.Resource(u)
	if err != nil {
		c.t.Fatal(err)
	}
	return res
}

// get returns the object, nil when it does not exist.
func (c *conformance) get(ctx context.Context, r ref) (*unstructured.Unstructured, error) {
	u, err := c.resource(r).Get(ctx, r.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return u, err
}

func (c *conformance) delete(r ref) {
	c.t.Helper()
	if err := c.resource(r).Delete(context.Background(), r.name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// waitFor polls until the object satisfies cond (nil: absent) and returns it.
func (c *conformance) waitFor(what string, r ref, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	c.t.Helper()
	var last *unstructured.Unstructured
	poll(c.t, what, func(ctx context.Context) (bool, error) {
		var err error
		last, err = c.get(ctx, r)
		return err == nil && cond(last), err
	})
	return last
}

// mustExist fails the test unless the object exists, with uid when given.
func (c *conformance) mustExist(r ref, uid types.UID, what string) {
	c.t.Helper()
	u, err := c.get(context.Background(), r)
	switch {
	case err != nil:
		c.t.Fatal(err)
	case u == nil:
		c.t.Errorf("%s: %s %s/%s is gone", what, r.kind, r.namespace, r.name)
	case uid != "" && u.GetUID() != uid:
		c.t.Errorf("%s: %s %s/%s was generated again (UID %s → %s)", what, r.kind, r.namespace, r.name, uid, u.GetUID())
	}
}

// deletePolicy deletes a GeneratingPolicy, as a chainsaw delete step does,
// and waits until Sprout has finished with it: its last sync deletes the
// record its first one wrote.
func (c *conformance) deletePolicy(apiVersion, name string) {
	c.t.Helper()
	policyRecord(c.t, name)
	c.delete(ref{apiVersion, apiv1.GeneratingPolicyKind, "", name})
	records := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories)
	poll(c.t, "the deleted policy's record to go", func(ctx context.Context) (bool, error) {
		_, err := records.Get(ctx, "gpol."+name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), notFoundIsNil(err)
	})
}

// running waits until a GeneratingPolicy is Ready: it watches its triggers,
// so that one created and deleted at once is seen.
func (c *conformance) running(name string) {
	c.t.Helper()
	poll(c.t, "the policy to be running", func(ctx context.Context) (bool, error) {
		cond, err := policyCondition(ctx, name)
		return cond != nil && cond.Status == metav1.ConditionTrue, notFoundIsNil(err)
	})
}

// outlivesItsPolicy waits for downstream, deletes the GeneratingPolicy
// name, and fails unless the same downstream is still there.
func (c *conformance) outlivesItsPolicy(downstream ref, apiVersion, name string) {
	c.t.Helper()
	first := c.waitFor("the downstream", downstream, present)
	c.deletePolicy(apiVersion, name)
	c.mustExist(downstream, first.GetUID(), "the deleted policy's downstream")
}

// syncedPast creates a marker trigger, doc, and waits for its downstream:
// once it exists, the policy has synced what came before the marker.
func (c *conformance) syncedPast(doc string, downstream ref) {
	c.t.Helper()
	c.create(doc)
	c.waitFor("the marker's downstream", downstream, present)
}

func present(u *unstructured.Unstructured) bool { return u != nil }
func gone(u *unstructured.Unstructured) bool    { return u == nil }

// networkPolicyTrigger is the NetworkPolicy the clone/sync scenarios trigger
// with, named as its Namespace.
func networkPolicyTrigger(name string) string {
	return `
apiVersion: v1
kind: Namespace
metadata:
  name: ` + name + `
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: ` + name + `
  namespace: ` + name + `
spec:
  podSelector: {}
  policyTypes:
  - Ingress
  - Egress
`
}

// sourceSecret is the clone source of the clone scenarios, in default.
func sourceSecret(name string) string {
	return `
apiVersion: v1
data:
  foo: YmFy
kind: Secret
metadata:
  name: ` + name + `
  namespace: default
type: Opaque
`
}

// TestConformanceCloneSyncDeleteTrigger: a synchronized clone goes with its
// trigger.
func TestConformanceCloneSyncDeleteTrigger(t *testing.T) {
	c := newConformance(t)
	c.create(c.policy("generating-policies/clone/sync/sync-delete-trigger"))
	c.create(sourceSecret("sync-delete-trigger"))
	c.create(networkPolicyTrigger("sync-delete-trigger"))
	clone := secretRef("sync-delete-trigger", "sync-delete-trigger")
	c.waitFor("the downstream", clone, present)
	c.delete(ref{"networking.k8s.io/v1", "NetworkPolicy", "sync-delete-trigger", "sync-delete-trigger"})
	c.waitFor("the downstream to go with its trigger", clone, gone)
}

// TestConformanceCloneSyncDeleteOneTrigger: of two triggers' clones, only
// the deleted trigger's goes.
func TestConformanceCloneSyncDeleteOneTrigger(t *testing.T) {
	c := newConformance(t)
	c.create(c.policy("generating-policies/clone/sync/sync-delete-one-trigger"))
	c.create(sourceSecret("clone-sync-delete-one-trigger"))
	first, second := "clone-sync-delete-one-trigger-1", "clone-sync-delete-one-trigger-2"
	c.create(networkPolicyTrigger(first))
	c.create(networkPolicyTrigger(second))
	firstClone := secretRef(first, "clone-sync-delete-one-trigger")
	secondClone := secretRef(second, "clone-sync-delete-one-trigger")
	c.waitFor("the first downstream", firstClone, present)
	kept := c.waitFor("the second downstream", secondClone, present)
	c.delete(ref{"networking.k8s.io/v1", "NetworkPolicy", first, first})
	c.waitFor("the deleted trigger's downstream to go", firstClone, gone)
	c.mustExist(secondClone, kept.GetUID(), "the other trigger's downstream")
}

// configMapIn is a Namespace and a ConfigMap in it.
func configMapIn(ns, name string) string {
	return `
apiVersion: v1
kind: Namespace
metadata:
  name: ` + ns + `
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + name + `
  namespace: ` + ns + `
`
}

// TestConformanceCloneNoSyncDeleteTrigger: a clone without synchronize
// outlives its trigger.
func TestConformanceCloneNoSyncDeleteTrigger(t *testing.T) {
	c := newConformance(t)
	c.create(c.policy("generating-policies/clone/nosync/nosync-delete-trigger"))
	c.create(sourceSecret("regcred"))
	c.create(configMapIn("test-ns", "test-org"))
	clone := c.waitFor("the downstream", secretRef("test-ns", "regcred"), present)
	c.delete(configMapRef("test-ns", "test-org"))
	c.syncedPast(configMapIn("test-ns-marker", "test-org"), secretRef("test-ns-marker", "regcred"))
	c.mustExist(secretRef("test-ns", "regcred"), clone.GetUID(), "the deleted trigger's downstream")
}

// TestConformanceCloneGenerateOnTriggerDeletion: a policy that lists only
// DELETE clones when its trigger is deleted, into the trigger's Namespace
// as namespaceObject names it.
func TestConformanceCloneGenerateOnTriggerDeletion(t *testing.T) {
	newConformance(t).generateOnTriggerDeletion("clone-generate-on-trigger-deletion", "clone-generate-on-trigger-deletion")
}

// generateOnTriggerDeletion runs the scenario of
// TestConformanceCloneGenerateOnTriggerDeletion with the trigger, a
// ConfigMap name, in the Namespace ns.
func (c *conformance) generateOnTriggerDeletion(ns, name string) {
	c.t.Helper()
	c.create(c.policy("generating-policies/clone/nosync/generate-on-trigger-deletion"))
	c.create(sourceSecret("clone-generate-on-trigger-deletion"))
	c.running("generate-networkpolicy")
	c.create(configMapIn(ns, name))
	c.delete(configMapRef(ns, name))
	c.waitFor("the downstream generated on the trigger's deletion", secretRef(ns, "clone-generate-on-trigger-deletion"), present)
}

// TestConformanceCloneNoSyncDeletePolicy: a clone stays when its policy,
// without synchronize, is deleted.
func TestConformanceCloneNoSyncDeletePolicy(t *testing.T) {
	c := newConformance(t)
	c.create(c.policy("generating-policies/clone/nosync/nosync-delete-policy"))
	c.create(sourceSecret("regcred"))
	c.create("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: nosync-delete-policy-clone\n")
	c.outlivesItsPolicy(secretRef("nosync-delete-policy-clone", "regcred"), "policies.kyverno.io/v1beta1", "generate-secret")
}
