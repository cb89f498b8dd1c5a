package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// clonePolicy clones, for every ConfigMap trigger labelled app=<app>, the
// Secrets of sourceNS labelled clone=<app> (List, one generate entry) and
// the Secret "main" (Get, another) into the trigger's namespace.
func clonePolicy(name, app, sourceNS string, synchronize bool) string {
	return fmt.Sprintf(`apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata:
  name: %[1]s
spec:
  evaluation:
    synchronize: {enabled: %[4]t}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
    objectSelector:
      matchLabels: {app: %[2]s}
  variables:
  - name: listed
    expression: >-
      resource.List("v1", "secrets", "%[3]s", {"clone": "%[2]s"})
  generate:
  - expression: generator.Apply(object.metadata.namespace, [variables.listed])
  - expression: >-
      generator.Apply(object.metadata.namespace, [resource.Get("v1", "secrets", "%[3]s", "main")])
`, name, app, sourceNS, synchronize)
}

func TestCloneSourceWithSynchronize(t *testing.T) {
	startController(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	createNamespace(t, "clone-sources", nil)
	secret := func(name string, labels map[string]string, value string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "clone-sources", Labels: labels,
			Annotations: map[string]string{"note": value}}, Data: map[string][]byte{"v": []byte(value)}}
		if _, err := kube.CoreV1().Secrets("clone-sources").Create(ctx, s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			_, err = kube.CoreV1().Secrets("clone-sources").Update(ctx, s, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	secret("one", map[string]string{"clone": "cl"}, "1")
	secret("two", map[string]string{"clone": "cl"}, "2")
	secret("main", nil, "m")

	tb := newTable(t, "clone-dest")
	tb.applyPolicy(clonePolicy("clone-sync", "cl", "clone-sources", true))
	t.Cleanup(func() { tb.deletePolicy("clone-sync") })
	tb.trigger("t", "cl", "x")
	getSecret := func(name string) *corev1.Secret {
		s, err := kube.CoreV1().Secrets("clone-dest").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	waitSecret := func(what, name string, cond func(*corev1.Secret) bool) {
		t.Helper()
		poll(t, what, func(context.Context) (bool, error) { return cond(getSecret(name)), nil })
	}
	for _, n := range []string{"one", "two", "main"} {
		waitSecret("the clone of "+n, n, func(s *corev1.Secret) bool { return s != nil })
	}

	t.Run("modified source: data, labels and annotations follow", func(t *testing.T) {
		secret("one", map[string]string{"clone": "cl", "extra": "yes"}, "1b")
		waitSecret("the clone to follow", "one", func(s *corev1.Secret) bool {
			return s != nil && string(s.Data["v"]) == "1b" && s.Labels["extra"] == "yes" && s.Annotations["note"] == "1b"
		})
	})
	t.Run("one of several listed sources deleted: only its clone goes", func(t *testing.T) {
		if err := kube.CoreV1().Secrets("clone-sources").Delete(ctx, "two", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSecret("two's clone to go", "two", func(s *corev1.Secret) bool { return s == nil })
		if getSecret("one") == nil || getSecret("main") == nil {
			t.Error("other clones went too")
		}
	})
	t.Run("source read with Get deleted: its clone goes", func(t *testing.T) {
		if err := kube.CoreV1().Secrets("clone-sources").Delete(ctx, "main", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSecret("main's clone to go", "main", func(s *corev1.Secret) bool { return s == nil })
		if getSecret("one") == nil {
			t.Error("a missing source of one generate entry took the clones of another")
		}
	})
}

func TestCloneSourceWithoutSynchronize(t *testing.T) {
	logs := startController(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	createNamespace(t, "noclone-src", nil)
	if _, err := kube.CoreV1().Secrets("noclone-src").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "main"},
		Data: map[string][]byte{"v": []byte("1")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tb := newTable(t, "noclone-dest")
	tb.applyPolicy(clonePolicy("clone-nosync", "ncl", "noclone-src", false))
	t.Cleanup(func() { tb.deletePolicy("clone-nosync") })
	tb.trigger("t", "ncl", "x")
	clone := func() *corev1.Secret {
		s, err := kube.CoreV1().Secrets("noclone-dest").Get(ctx, "main", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return s
	}
	poll(t, "the clone", func(context.Context) (bool, error) { return clone() != nil, nil })

	src, err := kube.CoreV1().Secrets("noclone-src").Get(ctx, "main", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src.Data["v"] = []byte("2")
	if _, err := kube.CoreV1().Secrets("noclone-src").Update(ctx, src, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Secrets("noclone-src").Delete(ctx, "main", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The policy's syncs are serialised: once a sync started after the one
	// that found the source missing has logged too, that one has finished.
	missingFor := func(trigger string) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "clone sources not found") && strings.Contains(line, "noclone-dest/"+trigger+`"`) {
					return true, nil
				}
			}
			return false, nil
		}
	}
	poll(t, "a sync that finds the source gone", missingFor("t"))
	tb.trigger("t2", "ncl", "y")
	poll(t, "a later sync", missingFor("t2"))
	c := clone()
	if c == nil {
		t.Fatal("the clone went with its source, without synchronize")
	}
	if string(c.Data["v"]) != "1" {
		t.Errorf("the clone followed its source without synchronize: %q", c.Data["v"])
	}
}
