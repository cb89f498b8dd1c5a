package queue

import (
	"sync"

	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// Tenant is who a policy's work is counted against when workers are
// shared: a NamespacedGeneratingPolicy's namespace, or "" for the cluster
// policies, which are the platform's whatever their source.
func Tenant(key policy.Key) string { return key.Namespace }

// fair is the order the workqueue hands out policies (client-go's
// workqueue.Queue, called under the workqueue's lock): round-robin across
// the tenants with keys waiting, first in first out within each. A tenant
// that holds its share of the workers is passed over while another
// tenant, holding less, waits. A worker is never left idle while keys
// wait: when every waiting tenant holds its share, the one holding fewest
// workers is next.
type fair struct {
	// mu guards what done, called outside the workqueue's lock, changes.
	mu      sync.Mutex
	workers int
	// tenants holds every tenant with keys waiting or workers running.
	tenants map[string]*tenant
	// ring lists the tenants with keys waiting, in turn order; next is
	// whose turn it is.
	ring    []string
	next    int
	waiting int
}

type tenant struct {
	keys    []policy.Key
	running int
}

func newFair(workers int) *fair {
	return &fair{workers: max(workers, 1), tenants: map[string]*tenant{}}
}

// Touch keeps a key where it waits: its tenant's order is first queued,
// first served.
func (f *fair) Touch(policy.Key) {}

func (f *fair) Push(key policy.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := Tenant(key)
	t := f.tenants[name]
	if t == nil {
		t = &tenant{}
		f.tenants[name] = t
	}
	if len(t.keys) == 0 {
		f.ring = append(f.ring, name)
	}
	t.keys = append(t.keys, key)
	f.waiting++
}

func (f *fair) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}

// Pop takes the next key, and counts a worker for its tenant until done.
// The workqueue calls it only when Len is not zero.
func (f *fair) Pop() policy.Key {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.pick()
	t := f.tenants[f.ring[i]]
	key := t.keys[0]
	t.keys[0] = policy.Key{}
	t.keys = t.keys[1:]
	t.running++
	f.waiting--
	if len(t.keys) == 0 {
		f.ring = append(f.ring[:i], f.ring[i+1:]...)
		f.next = i
	} else {
		f.next = i + 1
	}
	if f.next >= len(f.ring) {
		f.next = 0
	}
	return key
}

// pick is the index in the ring of the tenant whose key is next: the first
// from next holding less than its share, or else the one holding fewest.
func (f *fair) pick() int {
	share := max(f.workers/len(f.tenants), 1)
	pick := -1
	for n := range len(f.ring) {
		i := (f.next + n) % len(f.ring)
		running := f.tenants[f.ring[i]].running
		if running < share {
			return i
		}
		if pick < 0 || running < f.tenants[f.ring[pick]].running {
			pick = i
		}
	}
	return pick
}

// done releases the worker that took key.
func (f *fair) done(key policy.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := Tenant(key)
	t := f.tenants[name]
	if t == nil || t.running == 0 {
		return
	}
	t.running--
	if t.running == 0 && len(t.keys) == 0 {
		delete(f.tenants, name)
	}
}
