package reconcile

import (
	"context"
	"errors"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// recheckPermissions resolves every policy's rules again, and checks its
// permissions, from reviews asked once per account, verb and resource: a
// policy whose watched resources changed (a permission revoked, or a
// resource a wildcard names granted) gets them and is queued, and so is
// one whose RBACPermissionsGranted verdict changed. Informers no policy
// needs any more stop.
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
		triggers, refused, err := c.resolveRules(cp.Policy)
		var discoveryErr *discoveryError
		if errors.As(err, &discoveryErr) && !errors.As(cp.ResolveErr, &discoveryErr) {
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
	if last := c.states.of(key).telling().Reported(); last != nil && ctx.Err() == nil && report.VerdictMessage(last.Err) != now {
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
