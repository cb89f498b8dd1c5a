package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/sources"
)

// TestNoPolicyStateOutlivesItsPolicy: 1,000 policies enter, each generating
// one object, and leave; afterwards no store the controller keeps by policy
// holds any of them. Each store once kept something of every policy that
// ever ran (the failure told in an Event, the outcome last written, the
// count of self-triggers) until Sprout restarted.
func TestNoPolicyStateOutlivesItsPolicy(t *testing.T) {
	const policies, triggers = 1000, 10
	_, c := runController(t, func(o *reconcile.Options) {
		src := sources.NewCluster(dynamic.NewForConfigOrDie(cfg))
		src.SelectPolicies(labels.SelectorFromSet(labels.Set{"lifecycle": "yes"}))
		o.Sources, o.Workers = []sources.Source{src}, 8
	})
	tb := newTable(t, "lifecycle")
	for k := range triggers {
		tb.trigger(fmt.Sprintf("t%d", k), fmt.Sprintf("life-%d", k), "v")
	}
	client := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies)
	// One request per policy, eight at a time: a deletecollection of a
	// thousand can outlast the API server's request timeout on a busy
	// machine.
	deleteAll := func() error {
		return inParallel(8, policies, func(i int) error {
			err := client.Delete(context.Background(), fmt.Sprintf("life-%04d", i), metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}
	t.Cleanup(func() { _ = deleteAll() })
	_ = inParallel(8, policies, func(i int) error {
		doc := generatingExisting(derivedPolicy(fmt.Sprintf("life-%04d", i), fmt.Sprintf("life-%d", i%triggers), fmt.Sprintf("o%04d", i), "v", true, false))
		tb.applyPolicy(strings.Replace(doc, "metadata:\n", "metadata:\n  labels: {lifecycle: \"yes\"}\n", 1))
		return nil
	})

	generated := func(ctx context.Context) (int, error) {
		list, err := tb.kube.CoreV1().ConfigMaps(tb.ns).List(ctx, metav1.ListOptions{LabelSelector: sproutv1alpha1.LabelManagedBy + "=" + sproutv1alpha1.ManagedBy})
		if err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}
	waitLong(t, "every policy's object", func(ctx context.Context) (bool, error) {
		n, err := generated(ctx)
		return n == policies, err
	})
	if err := deleteAll(); err != nil {
		t.Fatal(err)
	}
	var left map[string]int
	waitLong(t, "every policy cleaned up after", func(ctx context.Context) (bool, error) {
		n, err := generated(ctx)
		if err != nil || n > 0 {
			return false, err
		}
		left = c.PolicyStateLeft()
		for _, n := range left {
			if n > 0 {
				return false, nil
			}
		}
		return true, nil
	}, func() string { return fmt.Sprintf("per-policy state left: %v", left) })
}

// waitLong polls cond for up to three minutes: what a thousand policies
// take on a busy machine. explain, if given, says what was seen last.
func waitLong(t *testing.T, what string, cond func(context.Context) (bool, error), explain ...func() string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 3*time.Minute, true, cond); err != nil {
		for _, e := range explain {
			t.Log(e())
		}
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
