package sources

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sprout-gitops/sprout/celenv"
)

// Check is the outcome of one check of a polled source.
type Check string

const (
	// CheckTaken: a new revision was taken.
	CheckTaken Check = "taken"
	// CheckUnchanged: the revision has not moved.
	CheckUnchanged Check = "unchanged"
	// CheckFailed: the remote could not be read or the revision was rejected.
	CheckFailed Check = "failed"
)

// Status is what a polled source last did, for logs, records and metrics.
type Status struct {
	// Check is the outcome of the last check.
	Check Check
	// Revision is the last revision taken.
	Revision string
	// Policies counts the policies of that revision.
	Policies int
	// Err is why the last fetch or load failed, if it did; the last good
	// revision keeps running meanwhile.
	Err error
	// Fetched is when the source was last checked.
	Fetched time.Time
}

// fetchFunc returns the policies and exceptions of the source's current
// revision, or unchanged when the revision is still last.
type fetchFunc func(ctx context.Context, last string) (got contents, revision string, unchanged bool, err error)

// poller turns a fetch function into a Source: it polls, and hands over a
// revision only whole (Load rejects a revision with any broken policy), as
// the difference from the last one: new and changed policies are upserted,
// missing ones deleted.
type poller struct {
	name     string
	interval time.Duration
	fetch    fetchFunc

	running sync.WaitGroup

	mu       sync.Mutex
	selector labels.Selector // nil: every policy
	// unselected are the policies of the last revision the selector
	// leaves out, by policy reference.
	unselected map[string]bool
	status     Status
	attempted  bool
	complete   bool
	delivered  map[string]Policy // by policy reference
}

func newPoller(name string, interval time.Duration, fetch fetchFunc) *poller {
	return &poller{name: name, interval: interval, fetch: fetch, delivered: map[string]Policy{}}
}

// Name names the source.
func (p *poller) Name() string { return p.name }

// Start polls until ctx ends, the first time at once.
func (p *poller) Start(ctx context.Context, h Handler) error {
	p.running.Go(func() { wait.UntilWithContext(ctx, func(ctx context.Context) { p.poll(ctx, h) }, p.interval) })
	return nil
}

// Wait returns once polling has stopped after its context ended, so a
// clone under way has removed its temporary folder.
func (p *poller) Wait() { p.running.Wait() }

// HasSynced reports whether the first fetch has been tried.
func (p *poller) HasSynced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attempted
}

// Complete reports whether a revision has been taken: until then the source
// says nothing about which policies are gone.
func (p *poller) Complete() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.complete
}

// Status returns what the source last did.
func (p *poller) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

func (p *poller) poll(ctx context.Context, h Handler) {
	p.mu.Lock()
	last := p.status.Revision
	p.mu.Unlock()
	got, revision, unchanged, err := p.fetch(ctx, last)
	if err != nil && ctx.Err() != nil {
		return // cut short by a shutdown: not a failed check
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempted = true
	p.status.Fetched = time.Now()
	p.status.Err = err
	switch {
	case err != nil:
		p.status.Check = CheckFailed
		h.SourceChecked(p.name, p.status)
		return
	case unchanged:
		p.status.Check = CheckUnchanged
		h.SourceChecked(p.name, p.status)
		return
	}
	// The exceptions first: a policy of the revision never runs without
	// those that came with it.
	for i := range got.exceptions {
		got.exceptions[i].Source = p.name
	}
	handExceptions(h, p.name, got.exceptions)
	next, unselected := map[string]Policy{}, map[string]bool{}
	for _, pol := range got.policies {
		if !selects(p.selector, pol.GetLabels()) {
			unselected[celenv.PolicyRef(pol.Policy)] = true
			continue
		}
		identify(pol.Policy, p.name)
		pol.Source, pol.Revision = p.name, revision
		next[celenv.PolicyRef(pol.Policy)] = pol
	}
	for ref, old := range p.delivered {
		switch _, ok := next[ref]; {
		case ok:
		case unselected[ref]:
			h.Release(old) // relabelled: another shard's now
		default:
			h.Delete(old)
		}
	}
	p.unselected = unselected
	for _, pol := range next {
		h.Upsert(pol)
	}
	p.delivered = next
	first := !p.complete
	p.complete = true
	p.status.Revision, p.status.Policies, p.status.Check = revision, len(next), CheckTaken
	h.SourceChecked(p.name, p.status)
	if first {
		h.SourceComplete(p.name)
	}
}
