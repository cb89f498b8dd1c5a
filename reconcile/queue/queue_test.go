package queue

import (
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
	q := New(m)
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
