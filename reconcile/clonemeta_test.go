package reconcile_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
)

// TestCloneLeavesOtherToolsTrackingBehind: a clone of an object that Flux,
// Argo CD or kubectl apply track does not carry their labels and
// annotations, or Flux or Argo CD would claim or prune the copy; the
// source's other labels and annotations are copied.
func TestCloneLeavesOtherToolsTrackingBehind(t *testing.T) {
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	createNamespace(t, "meta-src", nil)
	if _, err := kube.CoreV1().Secrets("meta-src").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred",
			Labels: map[string]string{
				"kustomize.toolkit.fluxcd.io/name":      "infra",
				"kustomize.toolkit.fluxcd.io/namespace": "flux-system",
				"helm.toolkit.fluxcd.io/name":           "registry",
				"argocd.argoproj.io/instance":           "infra",
				"team":                                  "platform",
			},
			Annotations: map[string]string{
				"argocd.argoproj.io/tracking-id":                   "infra:/Secret:meta-src/regcred",
				"argocd.argoproj.io/sync-options":                  "Prune=false",
				"kustomize.toolkit.fluxcd.io/ssa":                  "Merge",
				"kubectl.kubernetes.io/last-applied-configuration": `{"kind":"Secret"}`,
				"example.com/note":                                 "copied",
			},
		},
		Data: map[string][]byte{"token": []byte("v1")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startController(t)
	applyFixture(t, "clone-get", "policy.yaml", func(u *unstructured.Unstructured) {
		u.SetName("clone-meta")
		vars, _, _ := unstructured.NestedSlice(u.Object, "spec", "variables")
		vars[1].(map[string]any)["expression"] = `resource.Get("v1", "secrets", "meta-src", "regcred")`
		_ = unstructured.SetNestedSlice(u.Object, vars, "spec", "variables")
	})
	createNamespace(t, "meta-dst", nil)

	var clone *corev1.Secret
	poll(t, "the clone", func(ctx context.Context) (bool, error) {
		var err error
		clone, err = kube.CoreV1().Secrets("meta-dst").Get(ctx, "regcred", metav1.GetOptions{})
		return err == nil, nil
	})
	for _, k := range []string{"kustomize.toolkit.fluxcd.io/name", "kustomize.toolkit.fluxcd.io/namespace", "helm.toolkit.fluxcd.io/name", "argocd.argoproj.io/instance"} {
		if v, ok := clone.Labels[k]; ok {
			t.Errorf("the clone carries the label %s=%s", k, v)
		}
	}
	for _, k := range []string{"argocd.argoproj.io/tracking-id", "argocd.argoproj.io/sync-options", "kustomize.toolkit.fluxcd.io/ssa", "kubectl.kubernetes.io/last-applied-configuration"} {
		if v, ok := clone.Annotations[k]; ok {
			t.Errorf("the clone carries the annotation %s=%s", k, v)
		}
	}
	if clone.Labels["team"] != "platform" || clone.Annotations["example.com/note"] != "copied" {
		t.Errorf("the clone lost the source's own metadata: labels %v, annotations %v", clone.Labels, clone.Annotations)
	}
}
