package queue

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

var key = policy.Key{Kind: "GeneratingPolicy", Name: "p"}

func newQueue(t *testing.T) *Queue {
	t.Helper()
	m, err := report.NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	q := New(m, 4)
	t.Cleanup(q.ShutDown)
	return q
}

// A trigger event marks its trigger; the first event's old object and a
// known cache key survive the events after it.
func TestTriggerEventsMarkTheirTriggers(t *testing.T) {
	q := newQueue(t)
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	first := &cluster.Object{}
	q.AddTrigger(key, "a", Change{GVR: cms, Key: "ns/a", Old: first}, 0)
	q.AddTrigger(key, "a", Change{}, 0) // an event on an object it generated: UID alone
	q.AddTrigger(key, "b", Change{GVR: cms, Key: "ns/b"}, 0)
	if q.Len() != 1 {
		t.Errorf("queued %d keys, want the policy once", q.Len())
	}
	got := q.Take(key)
	if got == nil || got.Full || len(got.Triggers) != 2 {
		t.Fatalf("taken %+v, want triggers a and b", got)
	}
	if a := got.Triggers["a"]; a.Key != "ns/a" || a.GVR != cms || a.Old != first {
		t.Errorf("trigger a %+v, want its key, resource and first old object kept", a)
	}
	if q.Take(key) != nil {
		t.Error("a second Take found changes: taking forgets them")
	}
}

// Anything but a trigger event marks the policy whole, and a trigger event
// after it adds nothing.
func TestOtherQueueingMarksFull(t *testing.T) {
	for name, add := range map[string]func(q *Queue){
		"Add":            func(q *Queue) { q.Add(key) },
		"AddAfter":       func(q *Queue) { q.AddAfter(key, 1) },
		"AddRateLimited": func(q *Queue) { q.AddRateLimited(key) },
		"MarkFull":       func(q *Queue) { q.MarkFull(key) },
	} {
		t.Run(name, func(t *testing.T) {
			q := newQueue(t)
			add(q)
			q.AddTrigger(key, "a", Change{Key: "ns/a"}, 0)
			if got := q.Take(key); got == nil || !got.Full || len(got.Triggers) != 0 {
				t.Errorf("taken %+v, want a full sync", got)
			}
		})
	}
}

// Past MaxChanged triggers, the policy's next sync is a full one.
func TestTooManyTriggersMarkFull(t *testing.T) {
	q := newQueue(t)
	for i := range MaxChanged + 1 {
		q.AddTrigger(key, types.UID(string(rune('a'+i%26))+string(rune(i))), Change{Key: "k"}, 0)
	}
	if got := q.Take(key); got == nil || !got.Full {
		t.Errorf("full %v after %d triggers, want a full sync", got != nil && got.Full, MaxChanged+1)
	}
	if q.Marked() != 0 {
		t.Errorf("%d policies still marked after Take", q.Marked())
	}
}

// A worker's key counts as taken until Done.
func TestTakenCountsKeysUntilDone(t *testing.T) {
	q := newQueue(t)
	q.Add(key)
	k, _ := q.Get()
	if q.Taken() != 1 || q.Len() != 0 {
		t.Errorf("taken %d, length %d after Get; want 1 and 0", q.Taken(), q.Len())
	}
	q.Done(k)
	if q.Taken() != 0 {
		t.Errorf("taken %d after Done, want 0", q.Taken())
	}
}

func keyOf(tenant string, i int) policy.Key {
	if tenant == "" {
		return policy.Key{Kind: "GeneratingPolicy", Name: "platform-" + strconv.Itoa(i)}
	}
	return policy.Key{Kind: "NamespacedGeneratingPolicy", Namespace: tenant, Name: "p" + strconv.Itoa(i)}
}

// A tenant with a hundred policies waiting delays another tenant's one
// policy by one pop at most.
func TestManyKeysOfATenantDoNotDelayAnother(t *testing.T) {
	q := newQueue(t)
	for i := range 100 {
		q.Add(keyOf("tenant", i))
	}
	platform := keyOf("", 0)
	q.Add(platform)
	for pops := 1; pops <= 3; pops++ {
		k, _ := q.Get()
		q.Done(k)
		if k == platform {
			if pops > 2 {
				t.Errorf("the platform's policy came %dth, want at most 2nd", pops)
			}
			return
		}
	}
	t.Error("the platform's policy did not come within 3 pops behind a tenant's 100")
}

// Four workers shared by two tenants with work waiting: each holds two,
// and a worker a tenant releases goes to it again only when the other
// holds its share.
func TestATenantHoldsItsShareWhileAnotherWaits(t *testing.T) {
	q := newQueue(t) // 4 workers
	for i := range 10 {
		q.Add(keyOf("a", i))
	}
	for i := range 10 {
		q.Add(keyOf("b", i))
	}
	held := map[string][]policy.Key{}
	for range 4 {
		k, _ := q.Get()
		held[Tenant(k)] = append(held[Tenant(k)], k)
	}
	if len(held["a"]) != 2 || len(held["b"]) != 2 {
		t.Fatalf("tenant a holds %d workers and b %d, want 2 each", len(held["a"]), len(held["b"]))
	}
	q.Done(held["b"][0])
	if k, _ := q.Get(); Tenant(k) != "b" {
		t.Errorf("a worker b released went to %q, which holds its share, while b waits", Tenant(k))
	}
}

// Whatever the order of adds and dones, a tenant is handed a worker
// beyond its share only when every other tenant waiting holds its share
// too: no worker stays idle while keys wait, and none is taken from a
// tenant below its share.
func TestNoTenantPassesItsShareWhileAnotherBelowWaits(t *testing.T) {
	const workers = 4
	q := newQueue(t)
	rng := rand.New(rand.NewPCG(1, 2))
	tenants := []string{"", "a", "b", "c", "d"}
	waiting, running := map[string]int{}, map[string][]policy.Key{}
	next := 0
	for step := range 2000 {
		switch n := rng.IntN(3); {
		case n == 0 || q.Len() == 0:
			tn := tenants[rng.IntN(len(tenants))]
			q.Add(keyOf(tn, next))
			next++
			waiting[tn]++
		case n == 1 && q.Taken() < workers:
			active := 0
			for _, tn := range tenants {
				if waiting[tn] > 0 || len(running[tn]) > 0 {
					active++
				}
			}
			share := max(workers/active, 1)
			k, _ := q.Get()
			tn := Tenant(k)
			if len(running[tn]) >= share {
				for _, other := range tenants {
					if other != tn && waiting[other] > 0 && len(running[other]) < share {
						t.Fatalf("step %d: tenant %q holding %d (share %d) was handed a worker while %q waits holding %d",
							step, tn, len(running[tn]), share, other, len(running[other]))
					}
				}
			}
			waiting[tn]--
			running[tn] = append(running[tn], k)
		default:
			tn := tenants[rng.IntN(len(tenants))]
			if len(running[tn]) > 0 {
				q.Done(running[tn][0])
				running[tn] = running[tn][1:]
			}
		}
	}
}

// A sync under way takes the triggers marked since it began that it does
// not hold, at most its limit; those it holds stay marked for the next, and
// a policy marked full gives nothing.
func TestTakeTriggersLeavesWhatTheSyncHolds(t *testing.T) {
	q := newQueue(t)
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	held := func(uid types.UID) bool { return uid == "a" }
	q.AddTrigger(key, "a", Change{GVR: cms, Key: "ns/a"}, 0)
	if got := q.TakeTriggers(key, held, 10); got != nil {
		t.Fatalf("took %+v, want nothing: the sync holds a", got)
	}
	q.AddTrigger(key, "b", Change{GVR: cms, Key: "ns/b"}, 0)
	q.AddTrigger(key, "c", Change{GVR: cms, Key: "ns/c"}, 0)
	if got := q.TakeTriggers(key, held, 1); got != nil {
		t.Fatalf("took %+v, want nothing past the limit", got)
	}
	got := q.TakeTriggers(key, held, 2)
	if got == nil || got.Full || len(got.Triggers) != 2 || got.Triggers["b"].Key != "ns/b" {
		t.Fatalf("took %+v, want b and c", got)
	}
	if left := q.Take(key); left == nil || len(left.Triggers) != 1 || left.Triggers["a"].Key != "ns/a" {
		t.Fatalf("left %+v, want a for the next sync", left)
	}
	q.AddTrigger(key, "d", Change{GVR: cms, Key: "ns/d"}, 0)
	q.MarkFull(key)
	if got := q.TakeTriggers(key, held, 10); got != nil {
		t.Fatalf("took %+v from a policy marked full", got)
	}
}

// Arrivals wakes at the policy's next mark, not at one made before it was
// armed, nor at another policy's.
func TestArrivalsWakeAtTheNextMark(t *testing.T) {
	q := newQueue(t)
	other := policy.Key{Kind: "GeneratingPolicy", Name: "other"}
	q.AddTrigger(key, "a", Change{Key: "ns/a"}, 0)
	ch, stop := q.Arrivals(key)
	defer stop()
	q.AddTrigger(other, "b", Change{Key: "ns/b"}, 0)
	select {
	case <-ch:
		t.Fatal("woken by a mark before it was armed, or by another policy's")
	default:
	}
	q.AddTrigger(key, "c", Change{Key: "ns/c"}, 0)
	select {
	case <-ch:
	default:
		t.Fatal("not woken by the policy's next mark")
	}
	ch, stop = q.Arrivals(key)
	stop()
	q.MarkFull(key)
	select {
	case <-ch:
		t.Fatal("woken after it stopped waiting")
	default:
	}
}
