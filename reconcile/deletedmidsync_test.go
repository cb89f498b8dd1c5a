package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// TestPolicyDeletedMidSyncWritesNothingMore: a policy is deleted while a
// long sync of it is writing. The sync stops writing (the creates under
// way finish, no other starts), what it wrote is pruned, and no status is
// tried for the policy that is gone.
func TestPolicyDeletedMidSyncWritesNothingMore(t *testing.T) {
	const ns, triggers = "midsync", 300
	tb := newTable(t, ns)
	for i := range triggers {
		tb.trigger(fmt.Sprintf("t%03d", i), ns, "v")
	}
	var mu sync.Mutex
	var creates []time.Time // when each create of a generated object was sent
	slow := rest.CopyConfig(cfg)
	slow.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodPost || req.URL.Path != "/api/v1/namespaces/"+ns+"/configmaps" {
				return rt.RoundTrip(req)
			}
			mu.Lock()
			creates = append(creates, time.Now())
			mu.Unlock()
			select { // a slow server, not a wait for the test's sake
			case <-time.After(50 * time.Millisecond):
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
			return rt.RoundTrip(req)
		})
	})
	logs, _ := runControllerOn(t, slow, nil)
	// generateExisting: the triggers predate the policy.
	tb.applyPolicy(generatingExisting(derivedPolicy("midsync", ns, "out", "one", true, false)))
	poll(t, "the sync to be writing", func(ctx context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(creates) > 0, nil
	})
	if err := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies).Delete(context.Background(), "midsync", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()

	records := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories)
	poll(t, "the policy's last sync", func(ctx context.Context) (bool, error) {
		_, err := records.Get(ctx, "gpol.midsync", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	poll(t, "every object the policy wrote to be pruned", func(ctx context.Context) (bool, error) {
		list, err := tb.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return countSuffix(list.Items, "-out") == 0, nil
	})
	mu.Lock()
	after, total := 0, len(creates)
	for _, at := range creates {
		if at.After(deleted) {
			after++
		}
	}
	mu.Unlock()
	t.Logf("%d of %d creates sent after the deletion", after, total)
	// The creates under way when the deletion reached Sprout may start
	// a moment after it was made: at most the applier's parallelism.
	if after > 16 {
		t.Errorf("%d of %d creates were sent after the policy was deleted", after, total)
	}
	if n := strings.Count(logs.String(), "status not written"); n != 0 {
		t.Errorf("%d status writes failed for the deleted policy", n)
	}
}

func countSuffix(items []corev1.ConfigMap, suffix string) int {
	n := 0
	for _, cm := range items {
		if strings.HasSuffix(cm.Name, suffix) {
			n++
		}
	}
	return n
}
