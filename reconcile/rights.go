package reconcile

// What the core does with rights: access answers, and the core keeps its
// answers on each policy's state and queues whom they concern.

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// AnnotationServiceAccount on a policy names the ServiceAccount it acts
// as (access.AnnotationServiceAccount).
const AnnotationServiceAccount = access.AnnotationServiceAccount

// DefaultServiceAccount is the account a NamespacedGeneratingPolicy acts
// as, in its own namespace, unless it names one
// (access.DefaultServiceAccount).
const DefaultServiceAccount = access.DefaultServiceAccount

// ReasonRefused is the Ready reason of a policy that generates objects
// Sprout must not write: kinds not allowed, bindings to roles that grant
// too much (access.Rights.Refuse).
const ReasonRefused = report.ReasonRefused

// access are the operator's bounds on what policies may do, by the
// options.
func (o Options) access() access.Options {
	return access.Options{
		Accounts:     access.Accounts{Default: o.DefaultServiceAccount, Namespaces: o.ServiceAccountNamespaces},
		AllowedKinds: o.AllowedKinds, AllowUnnamedGrants: o.AllowUnnamedGrants, ProtectedNamespaces: o.ProtectedNamespaces,
	}
}

// ValidateServiceAccountOptions checks the accounts flags before anything
// connects.
func ValidateServiceAccountOptions(o Options) error { return o.access().Accounts.Validate() }

// ParseKinds reads "Kind" and "Kind.group" names, as --allowed-kinds takes
// them ("ConfigMap,NetworkPolicy.networking.k8s.io").
func ParseKinds(names []string) ([]schema.GroupKind, error) {
	out := make([]schema.GroupKind, 0, len(names))
	for _, n := range names {
		gk := schema.ParseGroupKind(n)
		if gk.Kind == "" {
			return nil, fmt.Errorf("%q is not Kind or Kind.group", n)
		}
		out = append(out, gk)
	}
	return out, nil
}

// Protect adds namespaces to Options.ProtectedNamespaces: those whose
// Secrets and accounts are the cluster's, or Sprout's own once it knows
// them. Call it before Run.
func (c *Controller) Protect(namespaces ...string) {
	c.rights.Protect(namespaces...)
}

// roleChanged queues the policies whose bindings referred to the role, or
// to an aggregated ClusterRole it may join.
func (c *Controller) roleChanged(role string, clusterRole bool) {
	c.states.Each(func(key policy.Key, st *policyState) {
		if st.BoundTo(role, clusterRole) {
			c.queue.Add(key)
		}
	})
}

// pruneRefused deletes the bindings the policy made that v refused for
// the role they bind (access.Verdicts.RefusedAmong). Only those: the
// policy's other objects stay, as any refusal keeps its prune from
// running.
func (c *Controller) pruneRefused(ctx context.Context, w writer, key policy.Key, v *access.Verdicts) (inventory.ChangeSet, error) {
	if !v.AnyRefused() {
		return inventory.ChangeSet{}, nil
	}
	owned, err := c.ledger.Owned(key)
	if err != nil {
		return inventory.ChangeSet{}, err
	}
	refused := v.RefusedAmong(owned)
	if len(refused) == 0 {
		return inventory.ChangeSet{}, nil
	}
	return w.Prune(ctx, cluster.Decoded(refused))
}

// grantVerdict is a sync's permission verdict, for its outcome.
type grantVerdict = report.Verdict

// permissionVerdict is the policy's RBACPermissionsGranted verdict
// (access.Rights.Check) on its triggers, what its last sync read and what
// it wrote.
func (c *Controller) permissionVerdict(ctx context.Context, key policy.Key, cp *policy.Compiled) error {
	st := c.states.Of(key)
	read := sets.New(cp.Triggers...).Insert(cp.Refused...).Union(st.Reads())
	return c.rights.Check(ctx, cp.Policy, read, st.Ledger().Written())
}

// verdict checks the policy's permissions for a sync and remembers what it
// found, so that a recheck after an RBAC change can tell whether it
// changed.
func (c *Controller) verdict(ctx context.Context, key policy.Key, cp *policy.Compiled) *grantVerdict {
	err := c.permissionVerdict(ctx, key, cp)
	if ctx.Err() != nil {
		return nil // stopping, or the policy deleted: nothing was learnt
	}
	v := &grantVerdict{Err: err}
	c.states.Of(key).Told().Granted(v)
	return v
}

// recheckPermissions resolves every policy's rules again, and checks its
// permissions, from reviews asked once per account, verb and resource: a
// policy whose watched resources changed (a permission revoked, or a
// resource a wildcard names granted) gets them and is queued, and so is
// one whose RBACPermissionsGranted verdict changed, and one whose objects
// were judged by what its identity holds (its bindings, its labelled
// ClusterRoles), which the change may grant or revoke. Informers no
// policy needs any more stop.
func (c *Controller) recheckPermissions(ctx context.Context) {
	c.mu.RLock()
	policies := make(map[policy.Key]*policy.Compiled, len(c.policies))
	for key, cp := range c.policies {
		policies[key] = cp
	}
	c.mu.RUnlock()
	released := false
	for key, cp := range policies {
		if ctx.Err() != nil {
			return
		}
		if c.recheckPolicy(ctx, key, cp) {
			released = true
		}
		if c.states.Of(key).JudgedHeld() {
			c.queue.Add(key)
		}
	}
	if released {
		c.intake.releaseInformers()
	}
}

// recheckPolicy resolves one policy's rules again and reports whether the
// resources it watches changed. The resolution is kept on the policy as it
// is when the answer comes, not as it was when the recheck began: a status
// write delivers a copy of the same compilation meanwhile, and a resolution
// kept only on the copy it replaced would start a watch that the release
// after it stops at once. A new compilation resolved its rules itself, but
// perhaps from answers this recheck makes stale, so it is resolved too.
func (c *Controller) recheckPolicy(ctx context.Context, key policy.Key, cp *policy.Compiled) bool {
	for cp != nil && cp.Policy.PolicySpec().MatchConstraints != nil && cp.Program.Err() == nil {
		triggers, refused, err := c.rights.Resolve(c.ctx, cp.Policy)
		if access.DiscoveryFailed(err) && !access.DiscoveryFailed(cp.ResolveErr) {
			// Discovery is down, not the policy: it keeps what it watches.
			return false
		}
		next, cur := c.keepResolution(key, cp, triggers, refused, err)
		if next != nil {
			c.intake.ensureInformers(c.intake.triggerKeys(next)...)
			c.log.Info("permissions changed: triggers resolved again", "policy", key.String(), "triggers", len(triggers), "refused", len(refused))
			c.queue.Add(key)
			return true
		}
		if cur == cp {
			break // resolved as it was
		}
		cp = cur // another compilation, or none: resolved again
	}
	if cp == nil {
		return false
	}
	now := report.VerdictMessage(c.permissionVerdict(ctx, key, cp))
	if last := c.states.Of(key).Told().Reported(); last != nil && ctx.Err() == nil && report.VerdictMessage(last.Err) != now {
		c.queue.Add(key)
	}
	return false
}

// keepResolution keeps a resolution of cp's rules on the policy running
// under key when it is the same compilation and the resolution differs,
// and returns the policy kept (nil when none was) and the one running.
func (c *Controller) keepResolution(key policy.Key, cp *policy.Compiled, triggers, refused []schema.GroupVersionResource, err error) (kept, cur *policy.Compiled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur = c.policies[key]
	if cur == nil || cur.Program != cp.Program {
		return nil, cur
	}
	if slices.Equal(triggers, cur.Triggers) && slices.Equal(refused, cur.Refused) && errorText(err) == errorText(cur.ResolveErr) {
		return nil, cp
	}
	next := *cur
	next.Triggers, next.Refused, next.ResolveErr = triggers, refused, err
	c.policies[key] = &next
	return &next, &next
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// syncChecks answers the pipeline's questions about rights (syncAccess):
// from access.Rights, and, for what a policy was told and may prune, from
// the core's states and ledger.
type syncChecks struct{ c *Controller }

var _ syncAccess = syncChecks{}

func (a syncChecks) actingAs(ctx context.Context, p apiv1.Policy) (*access.Account, error) {
	return a.c.rights.ActingAs(ctx, p)
}

func (a syncChecks) verdict(ctx context.Context, key policy.Key, cp *policy.Compiled) *grantVerdict {
	return a.c.verdict(ctx, key, cp)
}

func (a syncChecks) resolveRules(p apiv1.Policy) (triggers, refused []schema.GroupVersionResource, _ error) {
	return a.c.rights.Resolve(a.c.ctx, p)
}

func (a syncChecks) maxObjects(cp *policy.Compiled) (int, error) {
	return maxObjects(cp, a.c.opts.MaxObjectsPerTrigger)
}

func (a syncChecks) refuse(ctx context.Context, p apiv1.Policy, desired []*unstructured.Unstructured, kinds []schema.GroupVersionKind, v *access.Verdicts, failed sets.Set[string]) ([]*unstructured.Unstructured, []schema.GroupVersionKind, []error, error) {
	return a.c.rights.Refuse(ctx, a.c.ctx.Done(), p, desired, kinds, v, failed)
}

func (a syncChecks) pruneRefused(ctx context.Context, w writer, key policy.Key, v *access.Verdicts) (inventory.ChangeSet, error) {
	return a.c.pruneRefused(ctx, w, key, v)
}

func (a syncChecks) waitsForPermission(err error) bool { return a.c.rights.WaitsForPermission(err) }

// Prove gives the controller the key it signs and verifies origins with
// (Options.ProofKey), once it is known: `sprout run` reads it from the
// cluster after the API server answers. Call it before Run.
func (c *Controller) Prove(key []byte, namespace, name string) error {
	if err := c.proof.Set(key); err != nil {
		return fmt.Errorf("proof key: %w", err)
	}
	c.proof.KeptIn(namespace, name)
	return nil
}
