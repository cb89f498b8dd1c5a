package reconcile

import (
	"time"

	"github.com/sprout-gitops/sprout/reconcile/blast"
	"github.com/sprout-gitops/sprout/reconcile/ledger"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
	"github.com/sprout-gitops/sprout/sources"
)

// policyHandler receives the policies of every source for a Controller.
// Sources start while the records are read: what they deliver waits for
// them (records).
type policyHandler struct {
	c       *Controller
	records *intakeGate
}

// intakeGate holds what the sources deliver until the controller can take
// it: opened once, or shut with the error that stops the controller.
type intakeGate struct {
	opened, closed chan struct{}
	err            error
}

func newIntakeGate() *intakeGate {
	return &intakeGate{opened: make(chan struct{}), closed: make(chan struct{})}
}

func (a *intakeGate) open() { close(a.opened) }

// isOpen reports whether a has been opened.
func (a *intakeGate) isOpen() bool {
	select {
	case <-a.opened:
		return true
	default:
	}
	return false
}

func (a *intakeGate) shut(err error) {
	a.err = err
	close(a.closed)
}

// wait waits until a is opened, nil, or shut, its error.
func (a *intakeGate) wait() error {
	select {
	case <-a.opened:
		return nil
	case <-a.closed:
		return a.err
	}
}

var _ sources.Handler = policyHandler{}

// Upsert compiles a new policy or a new generation of one, starts the
// informers its triggers need and queues it. A change that keeps the
// generation (a status write) only refreshes the policy kept for status.
func (h policyHandler) Upsert(p sources.Policy) {
	c := h.c
	var resolved *policy.Compiled
	ahead := !h.records.isOpen()
	if ahead {
		resolved = c.watchAhead(p)
	}
	if h.records.wait() != nil {
		return // the controller stops
	}
	key := policy.KeyOf(p.Policy)
	if p.Program == nil {
		c.log.Error("policy handed over without its program: its source does not compile policies", "policy", key.String(), "source", p.Source)
		return
	}
	names := c.ledger.Names()
	fresh := !names.Has(key, p.Source)
	held := names.Claim(key, p, h.rank(p.Source))
	if fresh {
		c.tell.Sources().Changed(c.ledger.Names().Sources(key)...) // counts and conflicts of every source with the name
	}
	if !held {
		c.log.Error("policy name conflict: another source with precedence holds it; this one is ignored",
			"policy", key.String(), "source", p.Source, "holder", names.Holder(key))
		if ahead {
			c.intake.releaseInformers()
		}
		return
	}
	c.states.Enter(key)
	c.mu.Lock()
	cur := c.policies[key]
	if cur != nil && cur.Policy.GetUID() == p.GetUID() && cur.Policy.GetGeneration() == p.GetGeneration() {
		requeue := c.dayTwoChanged(key, cur.Policy, p.Policy)
		next := *cur
		next.Policy, next.Content = p.Policy, blast.Revision(p.Policy)
		if report.ReportsToggled(cur.Policy, p.Policy) {
			// Every trigger is evaluated anew, so that each result is
			// reported again, or, in the full sync, dropped.
			next.Evaluations = policy.NewEvaluations()
			requeue = true
		}
		c.policies[key] = &next
		c.mu.Unlock()
		if requeue {
			c.queue.Add(key)
		}
		return
	}
	c.mu.Unlock()
	if c.opts.DryRun {
		c.adoptRecordedIdentity(p)
	}
	if cur == nil {
		c.ledger.Restore(key, string(p.GetUID()), c.states.Of(key).Ledger())
	}

	began := time.Now()
	cp := c.compile(p, cur, resolved)
	c.log.Debug("policy taken", "policy", key.String(), "duration", time.Since(began))
	c.keepGeneratedOnSyncOff(key, cur, cp)
	if err := cp.Program.Err(); err != nil {
		c.log.Error("policy does not compile", "policy", key.String(), "source", p.Source, "error", err.Error())
	}
	if cp.ResolveErr != nil {
		c.log.Error("policy triggers cannot all be watched", "policy", key.String(), "error", cp.ResolveErr.Error())
	}
	c.mu.Lock()
	if names.Holder(key) != p.Source {
		// Sources deliver concurrently: one of higher precedence claimed
		// the name while this copy compiled, and its copy must win.
		c.mu.Unlock()
		return
	}
	c.policies[key] = cp
	delete(c.deleted, key)
	c.mu.Unlock()
	c.intake.ensureInformers(c.intake.triggerKeys(cp)...)
	if cur != nil {
		c.intake.releaseInformers() // the new generation may watch less
	} else {
		// What its record says it wrote to is listed beside its triggers:
		// its first sync would start them only once its first part is
		// evaluated, and wait for their lists.
		c.intake.generated.Ensure(c.states.Of(key).Ledger().Written())
	}
	c.queue.Add(key)
}

// Delete queues a policy that is gone from its source for its last sync,
// which removes what it leaves behind unless it orphans its objects.
func (h policyHandler) Delete(p sources.Policy) {
	if h.records.wait() != nil {
		return
	}
	c := h.c
	key := policy.KeyOf(p.Policy)
	if !h.unclaim(key, p) {
		return
	}
	c.mu.Lock()
	spec := p.PolicySpec()
	// A suspended policy deleted leaves its objects, as a suspended Flux
	// Kustomization deleted does: suspended, it prunes nothing.
	gone := retired{ref: ledger.Ref(key), synchronize: spec.Synchronize(), orphan: spec.OrphanDownstreamOnPolicyDelete() || suspended(p.Policy)}
	if sa, err := c.rights.AccountOf(p.Policy); sa != nil && err == nil {
		gone.account = *sa
	}
	c.deleted[key] = gone
	delete(c.policies, key)
	c.mu.Unlock()
	c.stopRunning(key)
	st := c.states.Of(key)
	st.ForgetReads()
	st.SetTally(nil)
	st.Told().ForgetStatus()
	c.reads.Drop(key)
	c.log.Info("policy deleted", "policy", key.String(), "source", p.Source)
	c.queue.Add(key)
}

// SourceChecked keeps what a polled source found for its PolicySource and
// metrics, and logs a failure once per distinct error.
func (h policyHandler) SourceChecked(source string, st sources.Status) {
	if h.records.wait() != nil {
		return
	}
	h.c.tell.Sources().Checked(source, st)
}

// SourceComplete is called once a source has delivered its first whole
// revision: records of its policies missing from it are now known gone.
func (h policyHandler) SourceComplete(source string) {
	if h.records.wait() != nil {
		return
	}
	h.c.retireOrphanRecords(source)
}

// rank is a source's precedence: the cluster first, then the order of
// Options.Sources.
func (h policyHandler) rank(source string) int {
	if source == sources.ClusterSourceName {
		return -1
	}
	for i, s := range h.c.opts.Sources {
		if s.Name() == source {
			return i
		}
	}
	return len(h.c.opts.Sources)
}

// Invalid reports a policy its source cannot decode.
func (h policyHandler) Invalid(source, name string, err error) {
	h.c.log.Error("policy cannot be decoded", "policy", name, "source", source, "error", err.Error())
}
