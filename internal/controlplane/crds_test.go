package controlplane_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/internal/controlplane"
)

// kyvernoSpecs are policy specs as Kyverno documents them: one relying on
// the defaults of an empty evaluation, one setting every field.
var kyvernoSpecs = map[string]string{
	"defaults": `
matchConstraints:
  resourceRules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
evaluation: {}
generate:
- template:
    value: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
`,
	"every-field": `
matchConstraints:
  resourceRules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
evaluation:
  admission: {enabled: false}
  generateExisting: {enabled: true}
  synchronize: {}
  orphanDownstreamOnPolicyDelete: {enabled: true}
  skipBackgroundRequests: false
useServerSideApply: true
auditAnnotations:
- {key: a, valueExpression: "'b'"}
webhookConfiguration: {timeoutSeconds: 3}
generate:
- expression: generator.Apply(object.metadata.namespace, [])
`,
}

// TestPolicyStoredAlikeUnderEitherCRDSet creates the same Kyverno policies,
// at every served version, under Sprout's CRDs and under Kyverno's: the API
// server must accept and store the same spec (defaults included) under both,
// and Sprout must read what it stored.
func TestPolicyStoredAlikeUnderEitherCRDSet(t *testing.T) {
	shared, err := controlplane.CRDsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	other := controlplane.KyvernoCRDs
	if shared == other {
		other = controlplane.SproutCRDs
	}
	cp, err := controlplane.StartWith(other)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	clients := map[controlplane.CRDSet]dynamic.Interface{
		shared: dynamic.NewForConfigOrDie(cfg),
		other:  dynamic.NewForConfigOrDie(cp.Config),
	}
	for _, v := range apiv1.ServedVersions {
		for _, kind := range []string{apiv1.GeneratingPolicyKind, apiv1.NamespacedGeneratingPolicyKind} {
			if kind == apiv1.NamespacedGeneratingPolicyKind && v == "v1alpha1" {
				continue // not served, in either set
			}
			for name, spec := range kyvernoSpecs {
				t.Run(fmt.Sprintf("%s/%s/%s", v, kind, name), func(t *testing.T) {
					obj := policyObject(t, v, kind, fmt.Sprintf("%s-%s", v, name), spec)
					stored := map[controlplane.CRDSet]any{}
					for set, client := range clients {
						got := create(t, client, obj)
						if _, err := apiv1.FromUnstructured(got); err != nil {
							t.Errorf("under %s's CRDs, Sprout cannot read the stored policy: %v", set, err)
						}
						stored[set] = got.Object["spec"]
					}
					if !reflect.DeepEqual(stored[controlplane.SproutCRDs], stored[controlplane.KyvernoCRDs]) {
						t.Errorf("stored spec differs:\nSprout's CRDs:  %v\nKyverno's CRDs: %v", stored[controlplane.SproutCRDs], stored[controlplane.KyvernoCRDs])
					}
				})
			}
		}
	}
}

func policyObject(t *testing.T, version, kind, name, spec string) *unstructured.Unstructured {
	t.Helper()
	var s map[string]any
	if err := yaml.Unmarshal([]byte(spec), &s); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": s}}
	u.SetAPIVersion(apiv1.Group + "/" + version)
	u.SetKind(kind)
	u.SetName(name)
	if kind == apiv1.NamespacedGeneratingPolicyKind {
		u.SetNamespace("default")
	}
	return u
}

// create creates obj and returns it as the API server stored it.
func create(t *testing.T, client dynamic.Interface, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: apiv1.Group, Version: obj.GroupVersionKind().Version, Resource: "generatingpolicies"}
	if obj.GetNamespace() != "" {
		gvr.Resource = "namespacedgeneratingpolicies"
	}
	ctx := context.Background()
	r := client.Resource(gvr).Namespace(obj.GetNamespace())
	if _, err := r.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = r.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
	got, err := r.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}
