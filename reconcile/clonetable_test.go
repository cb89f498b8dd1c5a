package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/fixtures"
)

// clonePolicy is testpolicies/clone.yaml: for every ConfigMap trigger
// labelled app=<app>, it clones the Secrets of sourceNS labelled clone=<app>
// (List, one generate entry) and the Secret "main" (Get, another) into the
// trigger's namespace.
func clonePolicy(name, app, sourceNS string, synchronize bool) string {
	return fixtures.MustPolicyFile("clone", fixtures.Params{Name: name, App: app, Source: sourceNS, Synchronize: synchronize})
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

// TestCloneDownstreamTable: rows 1–4 of the table for clones, with and
// without synchronize.
func TestCloneDownstreamTable(t *testing.T) {
	onlySproutCRDs(t, "status.triggers, which it waits on")
	startController(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	createNamespace(t, "cdt-src", nil)
	if _, err := kube.CoreV1().Secrets("cdt-src").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "main"},
		Data: map[string][]byte{"v": []byte("1")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, synchronize := range []bool{true, false} {
		t.Run(fmt.Sprintf("synchronize=%v", synchronize), func(t *testing.T) {
			ns := fmt.Sprintf("cdt-%v", synchronize)
			app := ns
			tb := newTable(t, ns)
			// One clone per trigger, named after it, so marker triggers do not
			// generate the object under test.
			doc := replaceOnce(t, clonePolicy(ns, app, "cdt-src", synchronize), `resource.Get("v1", "secrets", "cdt-src", "main")`,
				`resource.Get("v1", "secrets", "cdt-src", "main").setField("metadata.name", object.metadata.name + "-main")`)
			tb.applyPolicy(doc)
			t.Cleanup(func() { tb.deletePolicy(ns) })
			tb.trigger("t", app, "x")
			name := "t-main"
			get := func() *corev1.Secret {
				s, err := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return nil
				}
				return s
			}
			waitClone := func(what string, cond func(*corev1.Secret) bool) {
				t.Helper()
				poll(t, what, func(context.Context) (bool, error) { return cond(get()), nil })
			}
			waitClone("the clone", func(s *corev1.Secret) bool { return s != nil })
			first := get()

			// 1. delete the clone
			if err := kube.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if synchronize {
				waitClone("the clone to be recreated", func(s *corev1.Secret) bool { return s != nil && s.UID != first.UID })
			} else {
				tb.settlePolicy(ns, app, 1)
				if get() != nil {
					t.Fatal("a deleted clone was recreated without synchronize")
				}
				// Bring it back by a new trigger for the remaining rows.
				tb.trigger("t-next", app, "x")
				name = "t-next-main"
				waitClone("a clone for a new trigger", func(s *corev1.Secret) bool { return s != nil })
			}
			current := get()

			// 2. modify the clone
			current.Data["v"] = []byte("tampered")
			if _, err := kube.CoreV1().Secrets(ns).Update(ctx, current, metav1.UpdateOptions{FieldManager: "someone-else"}); err != nil {
				t.Fatal(err)
			}
			if synchronize {
				waitClone("the clone to be reverted", func(s *corev1.Secret) bool { return s != nil && string(s.Data["v"]) == "1" })
			} else {
				tb.settlePolicy(ns, app, 2)
				if s := get(); s == nil || string(s.Data["v"]) != "tampered" {
					t.Fatal("a modified clone was reverted without synchronize")
				}
			}
			uid := get().UID

			// 3. modify the trigger, still matching
			owner := "t"
			if !synchronize {
				owner = "t-next"
			}
			tb.trigger(owner, app, "changed")
			tb.settlePolicy(ns, app, 3)
			if s := get(); s == nil || s.UID != uid {
				t.Fatal("modifying a still-matching trigger replaced or removed its clone")
			}

			// 4. the trigger no longer matches
			tb.trigger(owner, "elsewhere", "changed")
			if synchronize {
				waitClone("the clone to be pruned", func(s *corev1.Secret) bool { return s == nil })
			} else {
				tb.settlePolicy(ns, app, 4)
				if get() == nil {
					t.Fatal("a clone was pruned without synchronize")
				}
			}
		})
	}
}

// TestCloneListTimesNamespaceList: the seed's foreach-clone-list example in
// a cluster: every labelled Secret lands in every listed namespace.
func TestCloneListTimesNamespaceList(t *testing.T) {
	startController(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	for _, ns := range []string{"fx-src", "fx-1", "fx-2"} {
		createNamespace(t, ns, nil)
	}
	for _, s := range []struct{ name, allowed string }{{"shared-a", "true"}, {"shared-b", "true"}, {"private", "false"}} {
		if _, err := kube.CoreV1().Secrets("fx-src").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.name,
			Labels: map[string]string{"allowedToBeCloned": s.allowed}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tb := newTable(t, "fx-trigger")
	tb.applyPolicy(fixtures.MustPolicyFile("clone-to-listed", fixtures.Params{Name: "fx", App: "fx", Source: "fx-src"}))
	t.Cleanup(func() { tb.deletePolicy("fx") })
	tb.trigger("targets", "fx", "fx-1,fx-2")
	for _, ns := range []string{"fx-1", "fx-2"} {
		for _, name := range []string{"shared-a", "shared-b"} {
			poll(t, "the clone "+ns+"/"+name, func(ctx context.Context) (bool, error) {
				_, err := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
				return err == nil, nil
			})
		}
		if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "private", metav1.GetOptions{}); err == nil {
			t.Errorf("the unlabelled Secret was cloned into %s", ns)
		}
	}
	tb.trigger("targets", "fx", "fx-1")
	poll(t, "the clones in fx-2 to be pruned", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Secrets("fx-2").Get(ctx, "shared-a", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// settlePolicy creates marker triggers and waits until the policy's status
// counts more triggers than before: the status is written at the end of a
// sync, so a sync that started after everything done before has finished.
func (tb *table) settlePolicy(policy, app string, n int) {
	tb.t.Helper()
	policies := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies)
	count := func(ctx context.Context) int64 {
		u, err := policies.Get(ctx, policy, metav1.GetOptions{})
		if err != nil {
			return -1
		}
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "triggers")
		return n
	}
	before := count(context.Background())
	// Two markers: the change under test may itself take a trigger away.
	tb.trigger(fmt.Sprintf("marker-%d-a", n), app, "m")
	tb.trigger(fmt.Sprintf("marker-%d-b", n), app, "m")
	poll(tb.t, "a sync after the change", func(ctx context.Context) (bool, error) {
		return count(ctx) > before, nil
	})
}
