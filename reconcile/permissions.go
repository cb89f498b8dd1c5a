package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ConditionRBACPermissionsGranted is Kyverno's condition, in
// status.conditionStatus, saying whether the policy has the permissions it
// needs. Its reasons and messages are Kyverno's, so that tools waiting on
// it work unchanged.
const ConditionRBACPermissionsGranted = "RBACPermissionsGranted"

const (
	reasonSucceeded = "Succeeded"
	reasonFailed    = "Failed"
	// MessagePermissionsGranted is the message of a true
	// RBACPermissionsGranted, Kyverno's.
	MessagePermissionsGranted = "Policy is ready for reporting."
)

var (
	// readVerbs are what an informer and resource.Get/List need.
	readVerbs = []string{"get", "list", "watch"}
	// writeVerbs are what generating, updating and pruning need.
	writeVerbs = []string{"get", "list", "watch", "create", "patch", "delete"}
	// watchVerbs are what Sprout's own informers need.
	watchVerbs = []string{"list", "watch"}
)

// accessKey is one access review: may account (the zero account is Sprout
// itself) verb gvr in namespace ("" for every namespace).
type accessKey struct {
	account   serviceAccount
	verb      string
	gvr       schema.GroupVersionResource
	namespace string
}

// accessCache keeps the API server's answers to access reviews until RBAC
// changes: a sync, a trigger or a read asks the cache, not the API server.
// An answer asked before an invalidation is not kept after it.
type accessCache struct {
	mu      sync.Mutex
	gen     uint64
	answers map[accessKey]answer
	// expire, until RBAC changes are watched, makes answers older than
	// unwatchedAnswerAge stale: nothing else would tell them so.
	expire atomic.Bool
	// verdicts are, per policy, the RBACPermissionsGranted verdict its
	// last sync reported.
	verdicts map[policyKey]*grantVerdict
	// reviews counts the reviews asked of the API server.
	reviews atomic.Int64
}

// answer is the API server's answer to one review, and when it was given.
type answer struct {
	err error
	at  time.Time
}

// unwatchedAnswerAge is how long an answer is kept while RBAC changes are
// not watched.
const unwatchedAnswerAge = time.Minute

func (a *accessCache) lookup(k accessKey) (gen uint64, ok bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	got, ok := a.answers[k]
	if ok && a.expire.Load() && time.Since(got.at) > unwatchedAnswerAge {
		delete(a.answers, k)
		ok = false
	}
	return a.gen, ok, got.err
}

func (a *accessCache) store(k accessKey, gen uint64, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if gen != a.gen {
		return // RBAC changed while it was asked
	}
	if a.answers == nil {
		a.answers = map[accessKey]answer{}
	}
	a.answers[k] = answer{err: err, at: time.Now()}
}

// invalidate forgets every answer: RBAC changed.
func (a *accessCache) invalidate() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gen++
	clear(a.answers)
}

// remember keeps the verdict a sync reported for key.
func (a *accessCache) remember(key policyKey, verdict *grantVerdict) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verdicts == nil {
		a.verdicts = map[policyKey]*grantVerdict{}
	}
	a.verdicts[key] = verdict
}

// reported returns the verdict last reported for key, or nil.
func (a *accessCache) reported(key policyKey) *grantVerdict {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.verdicts[key]
}

func (a *accessCache) forget(key policyKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.verdicts, key)
}

// may asks whether sa (nil: Sprout itself) may verb gvr in namespace, from
// the cache or, the first time since RBAC changed, the API server. A
// review that could not be asked is not kept.
func (c *Controller) may(ctx context.Context, sa *serviceAccount, verb string, gvr schema.GroupVersionResource, namespace string) error {
	k := accessKey{verb: verb, gvr: gvr, namespace: namespace}
	if sa != nil {
		k.account = *sa
	}
	gen, ok, err := c.access.lookup(k)
	if ok {
		return err
	}
	err = c.review(ctx, sa, verb, gvr, namespace)
	var denied *deniedError
	if err == nil || errors.As(err, &denied) {
		c.access.store(k, gen, err)
	}
	return err
}

// review asks the API server: a SelfSubjectAccessReview for Sprout, a
// SubjectAccessReview for an account it impersonates.
func (c *Controller) review(ctx context.Context, sa *serviceAccount, verb string, gvr schema.GroupVersionResource, namespace string) error {
	c.access.reviews.Add(1)
	attrs := &authorizationv1.ResourceAttributes{
		Namespace: namespace, Verb: verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource,
	}
	var allowed bool
	who := "Sprout"
	if sa == nil {
		got, err := c.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("access review for Sprout: %w", err)
		}
		allowed = got.Status.Allowed
	} else {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               sa.user(),
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.namespace, "system:authenticated"},
			ResourceAttributes: attrs,
		}}
		got, err := c.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("access review for ServiceAccount %s: %w", sa, err)
		}
		allowed, who = got.Status.Allowed, "ServiceAccount "+sa.String()
	}
	if !allowed {
		where := "in every namespace"
		if namespace != "" {
			where = "in namespace " + namespace
		}
		return &deniedError{fmt.Sprintf("%s may not %s %s %s", who, verb, resourceName(gvr), where)}
	}
	return nil
}

// mayWatch checks that Sprout, whose informers watch, and the account the
// policy runs as, if any, may list and watch gvr in namespace.
func (c *Controller) mayWatch(ctx context.Context, sa *serviceAccount, gvr schema.GroupVersionResource, namespace string) error {
	whom := []*serviceAccount{nil}
	if sa != nil {
		whom = append(whom, sa)
	}
	for _, who := range whom {
		for _, verb := range watchVerbs {
			if err := c.may(ctx, who, verb, gvr, namespace); err != nil {
				return err
			}
		}
	}
	return nil
}

// permissionVerdict checks what the policy needs, from the cache: get,
// list and watch on its triggers (those its rules name and it was refused
// included) and on what its last sync read, and every verb of writeVerbs on
// what it generated, for the account it runs as (Sprout's own when none);
// and list and watch for Sprout, whose informers watch them all. It
// returns nil when everything is granted, else an error naming each verb
// and resource missing.
func (c *Controller) permissionVerdict(ctx context.Context, key policyKey, cp *compiledPolicy) error {
	sa, err := c.serviceAccountFor(cp.policy)
	if err != nil {
		return err
	}
	scope := cp.scope()
	c.mu.RLock()
	read := sets.New(cp.triggers...).Insert(cp.refused...).Union(c.dependencies[key])
	written := c.written[key].Clone()
	c.mu.RUnlock()
	var missing []string
	var failed []error
	ask := func(who *serviceAccount, verbs []string, gvr schema.GroupVersionResource, ns string) {
		for _, verb := range verbs {
			err := c.may(ctx, who, verb, gvr, ns)
			var denied *deniedError
			switch {
			case errors.As(err, &denied):
				missing = append(missing, denied.msg)
			case err != nil:
				failed = append(failed, err)
			}
		}
	}
	for gvr := range read {
		ns := c.watchKeyOf(scope, gvr).namespace
		if sa != nil {
			ask(nil, watchVerbs, gvr, ns)
		}
		ask(sa, readVerbs, gvr, ns)
	}
	for gvr := range written {
		if sa != nil {
			ask(nil, watchVerbs, gvr, "") // generated objects are watched everywhere
		}
		ask(sa, writeVerbs, gvr, c.watchKeyOf(scope, gvr).namespace)
	}
	if len(missing) == 0 && len(failed) == 0 {
		return nil
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	for _, err := range failed {
		missing = append(missing, err.Error())
	}
	// Kyverno's own words, capital and full stop, for tools that read them.
	return fmt.Errorf("Policy is not ready for reporting, missing permissions: %s.", strings.Join(missing, "; ")) //nolint:staticcheck,revive // Kyverno's message, word for word

}

// rbacCondition is the RBACPermissionsGranted condition of a verdict.
func rbacCondition(verdict error, generation int64) metav1.Condition {
	cond := metav1.Condition{
		Type:               ConditionRBACPermissionsGranted,
		Status:             metav1.ConditionTrue,
		Reason:             reasonSucceeded,
		Message:            MessagePermissionsGranted,
		ObservedGeneration: generation,
	}
	if verdict != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reasonFailed, verdict.Error()
	}
	return cond
}

// grantVerdict is a sync's permission verdict, for its outcome.
type grantVerdict struct{ err error }

// verdict checks the policy's permissions for a sync and remembers what it
// found, so that a recheck after an RBAC change can tell whether it
// changed.
func (c *Controller) verdict(ctx context.Context, key policyKey, cp *compiledPolicy) *grantVerdict {
	err := c.permissionVerdict(ctx, key, cp)
	if ctx.Err() != nil {
		return nil // stopping, or the policy deleted: nothing was learnt
	}
	v := &grantVerdict{err: err}
	c.access.remember(key, v)
	return v
}

func verdictString(err error) string {
	if err == nil {
		return MessagePermissionsGranted
	}
	return err.Error()
}
