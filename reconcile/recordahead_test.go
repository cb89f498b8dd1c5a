package reconcile_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// A sync names a resource in the policy's record while the informer of
// the resource's generated objects lists, not once it has listed: only
// the writes of the resource's objects must wait for the list (#44: a
// round trip off every first sync). The test holds that list until the
// record naming the resource is written; before, the record waited for
// the list for as long as a sync waits for a cache (2 s), then was written.
func TestTheRecordIsWrittenWhileTheGeneratedObjectsList(t *testing.T) {
	const color = "record-ahead"
	createNamespace(t, "record-ahead", map[string]string{"color": color})
	var (
		mu       sync.Mutex
		asked    time.Time // when the generated ConfigMaps' list was asked for
		recorded = make(chan time.Duration, 1)
		release  = make(chan struct{})
		hold     sync.Once
		seen     sync.Once
	)
	held := rest.CopyConfig(cfg)
	held.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			switch {
			case req.Method == http.MethodGet && req.URL.Path == "/api/v1/configmaps" && req.URL.Query().Get("labelSelector") == watches.GeneratedSelector:
				first := false
				hold.Do(func() { first = true })
				if first {
					mu.Lock()
					asked = time.Now()
					mu.Unlock()
					select {
					case <-release:
					case <-time.After(30 * time.Second):
					case <-req.Context().Done():
					}
				}
			case req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/"+sproutv1alpha1.PolicyInventories.Resource) && !strings.HasSuffix(req.URL.Path, "/status") && req.Body != nil:
				body, err := io.ReadAll(req.Body)
				if err != nil {
					return nil, err
				}
				req.Body = io.NopCloser(bytes.NewReader(body))
				mu.Lock()
				at := asked
				mu.Unlock()
				if !at.IsZero() && bytes.Contains(body, []byte(`"configmaps"`)) {
					seen.Do(func() {
						recorded <- time.Since(at)
						close(release)
					})
				}
			}
			return rt.RoundTrip(req)
		})
	})
	runControllerOn(t, held, nil)
	applyColorPolicy(t, "record-ahead", color, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, true, "spec", "evaluation", "generateExisting", "enabled")
	})
	select {
	case after := <-recorded:
		// The sync's wait for a cache is 2 s; its record came within a
		// fraction of that, while the list was held.
		if after > time.Second {
			t.Errorf("the record naming ConfigMaps was written %s after their list was asked for, while it was held: it waited for the list", after)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no record naming ConfigMaps written in a minute")
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	poll(t, "the ConfigMap generated once the list was let go", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ConfigMaps("record-ahead").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		return err == nil, notFoundIsNil(err)
	})
}
