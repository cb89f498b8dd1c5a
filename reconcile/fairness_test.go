package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/reconcile"
)

// syncCounts counts the syncs that ended, per tenant, as Options.OnSync
// reports them, and what the tenant had done when the platform's policy
// first synced after armed.
type syncCounts struct {
	mu       sync.Mutex
	tenant   int
	armed    bool
	atArming int
	seen     int // the tenant's syncs when the platform's first synced armed; -1 before
}

func (s *syncCounts) onSync(tenantPrefix, platform string) func(string, error) {
	return func(p string, _ error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case strings.HasPrefix(p, tenantPrefix):
			s.tenant++
		case p == platform && s.armed && s.seen < 0:
			s.seen = s.tenant - s.atArming
		}
	}
}

func (s *syncCounts) tenantSyncs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tenant
}

// arm starts counting the tenant's syncs until the platform's next.
func (s *syncCounts) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.atArming = true, s.tenant
}

// TestTenantDoesNotStarveThePlatform: a tenant whose twelve policies each
// spin to the time limit on the same trigger holds no more than its share
// of two workers, so a platform policy's trigger queued behind them is
// generated as soon as one worker is free, not after the tenant's queue.
func TestTenantDoesNotStarveThePlatform(t *testing.T) {
	const workers, spinners = 2, 12
	counts := &syncCounts{seen: -1}
	runController(t, func(o *reconcile.Options) {
		o.Workers, o.EvaluationTimeout = workers, time.Second
		o.OnSync = counts.onSync("NamespacedGeneratingPolicy/fair-tenant/", "GeneratingPolicy/fair-platform")
	})
	tenant := newTable(t, "fair-tenant")
	grant(t, tenant.kube, "fair-tenant", reconcile.DefaultServiceAccount, allVerbs, "configmaps")
	nsPolicies := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.NamespacedGeneratingPolicies).Namespace("fair-tenant")
	for i := range spinners {
		name := fmt.Sprintf("spin-%d", i)
		tenant.applyPolicy(spinningNamespacedPolicy(name, "fair-tenant", "fairtenant"))
		t.Cleanup(func() {
			if err := nsPolicies.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete %s: %v", name, err)
			}
		})
	}
	platform := newTable(t, "fair-platform")
	platform.applyPolicy(derivedPolicy("fair-platform", "fairplatform", "out", "platform", true, false))
	t.Cleanup(func() { platform.deletePolicy("fair-platform") })
	poll(t, "every policy Ready", func(ctx context.Context) (bool, error) {
		for i := range spinners {
			c, err := namespacedPolicyCondition(ctx, "fair-tenant", fmt.Sprintf("spin-%d", i))
			if err != nil || c == nil || c.Status != metav1.ConditionTrue {
				return false, err
			}
		}
		c, err := policyCondition(ctx, "fair-platform")
		return c != nil && c.Status == metav1.ConditionTrue, err
	})

	// A first trigger of the platform's: its caches are synced before the
	// one measured, whose sync then waits for nothing but a worker.
	platform.trigger("warm", "fairplatform", "w")
	platform.waitFor("the platform's first object", "warm-out", exists)

	// The tenant's twelve keys are queued, two are taken; once one is done
	// the platform's trigger comes.
	before := counts.tenantSyncs()
	tenant.trigger("spinner", "fairtenant", "spin")
	poll(t, "a sync of the tenant's spinning policies", func(context.Context) (bool, error) {
		return counts.tenantSyncs() > before, nil
	})
	counts.arm()
	platform.trigger("steady", "fairplatform", "s")
	platform.waitFor("the platform's object", "steady-out", exists)
	seen := -1
	poll(t, "the end of the platform's sync", func(context.Context) (bool, error) {
		counts.mu.Lock()
		defer counts.mu.Unlock()
		seen = counts.seen
		return seen >= 0, nil
	})
	t.Logf("the tenant's policies ended %d syncs between the platform's trigger and its sync", seen)
	// The worker that ends a sync first takes the platform's key; before
	// the key is queued and while it syncs, each worker may end one more.
	// In first-in first-out order it would wait for the tenant's nine
	// queued before it to be taken.
	if seen > 2*workers {
		t.Errorf("the tenant ended %d syncs before the platform's trigger was synced, want at most %d", seen, 2*workers)
	}
}

// spinningNamespacedPolicy is spinningPolicy as a NamespacedGeneratingPolicy
// in ns.
func spinningNamespacedPolicy(name, ns, app string) string {
	return spinning(fixtures.MustPolicyFile("derived", fixtures.Params{Name: name, Namespace: ns, App: app, Suffix: "out-" + name,
		Value: "spinning", Synchronize: true}))
}

// TestSpinningTenantWaitsForItsShare: a tenant's policy that spins to its
// time limit at each retry is charged the time: once it has run past its
// second of credit, its next evaluation waits for its share of a processor
// to pay the debt back, and the log says so, naming the tenant.
func TestSpinningTenantWaitsForItsShare(t *testing.T) {
	logs, _ := runController(t, func(o *reconcile.Options) {
		o.EvaluationTimeout, o.TenantCPUShare = 400*time.Millisecond, 0.25
	})
	tenant := newTable(t, "share-tenant")
	grant(t, tenant.kube, "share-tenant", reconcile.DefaultServiceAccount, allVerbs, "configmaps")
	tenant.applyPolicy(spinningNamespacedPolicy("spin", "share-tenant", "sharetenant"))
	t.Cleanup(func() {
		nsPolicies := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.NamespacedGeneratingPolicies).Namespace("share-tenant")
		if err := nsPolicies.Delete(context.Background(), "spin", metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete spin: %v", err)
		}
	})
	tenant.trigger("spinner", "sharetenant", "spin")
	// Three spins of 400 ms spend the second and owe 200 ms: 800 ms at a
	// quarter of a processor.
	poll(t, "the tenant's evaluations waiting for their share", func(context.Context) (bool, error) {
		return strings.Contains(logs.String(), `msg="a tenant's evaluations wait`), nil
	})
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="a tenant's evaluations wait`) && !strings.Contains(line, "namespace=share-tenant") {
			t.Errorf("the wait names another tenant: %s", line)
		}
	}
}
