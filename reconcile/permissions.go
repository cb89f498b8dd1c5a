package reconcile

import (
	"context"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// permissionVerdict checks what the policy needs, from the cache: get,
// list and watch on its triggers (those its rules name and it was refused
// included) and on what its last sync read, and every verb of writeVerbs on
// what it generated, for the account it runs as (Sprout's own when none);
// and list and watch for Sprout, whose informers watch them all. It
// returns nil when everything is granted, else an error naming each verb
// and resource missing.
func (c *Controller) permissionVerdict(ctx context.Context, key policy.Key, cp *policy.Compiled) error {
	sa, err := c.accountOf(cp.Policy)
	if err != nil {
		return err
	}
	scope := cp.Scope()
	st := c.states.of(key)
	read := sets.New(cp.Triggers...).Insert(cp.Refused...).Union(st.reads())
	written := st.ledger().Written()
	needs := make([]access.Need, 0, read.Len()+written.Len())
	for gvr := range read {
		ns := c.intake.watchKeyOf(scope, gvr).Namespace
		needs = append(needs, access.Need{GVR: gvr, Namespace: ns, Verbs: access.ReadVerbs, SproutNamespace: &ns})
	}
	everywhere := "" // generated objects are watched everywhere
	for gvr := range written {
		needs = append(needs, access.Need{GVR: gvr, Namespace: c.intake.watchKeyOf(scope, gvr).Namespace, Verbs: access.WriteVerbs, SproutNamespace: &everywhere})
	}
	return c.reviews.Check(ctx, sa, needs)
}

// grantVerdict is a sync's permission verdict, for its outcome.
type grantVerdict = report.Verdict

// verdict checks the policy's permissions for a sync and remembers what it
// found, so that a recheck after an RBAC change can tell whether it
// changed.
func (c *Controller) verdict(ctx context.Context, key policy.Key, cp *policy.Compiled) *grantVerdict {
	err := c.permissionVerdict(ctx, key, cp)
	if ctx.Err() != nil {
		return nil // stopping, or the policy deleted: nothing was learnt
	}
	v := &grantVerdict{Err: err}
	c.states.of(key).telling().Granted(v)
	return v
}
