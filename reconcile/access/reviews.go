package access

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
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

var (
	// ReadVerbs are what an informer and resource.Get/List need.
	ReadVerbs = []string{"get", "list", "watch"}
	// WriteVerbs are what generating, updating and pruning need.
	WriteVerbs = []string{"get", "list", "watch", "create", "patch", "delete"}
	// WatchVerbs are what Sprout's own informers need.
	WatchVerbs = []string{"list", "watch"}
)

// unwatchedAnswerAge is how long an answer is kept while RBAC changes are
// not watched: nothing else would tell it stale.
const unwatchedAnswerAge = time.Minute

// Reviews asks the API server whether Sprout or an account may do
// something, and keeps each answer until RBAC changes: a sync, a trigger
// or a read asks the cache, not the API server. An answer asked before an
// invalidation is not kept after it.
type Reviews struct {
	client authorizationclient.AuthorizationV1Interface

	mu      sync.Mutex
	gen     uint64
	answers map[key]answer
	// expire, until RBAC changes are watched, makes answers older than
	// unwatchedAnswerAge stale.
	expire atomic.Bool
	// asked counts the reviews asked of the API server.
	asked atomic.Int64
}

// key is one review: may account (the zero account is Sprout itself) verb
// gvr (its subresource, if set) in namespace ("" for every namespace), the
// object name if set; or verb the non-resource URL path.
type key struct {
	account     Account
	verb        string
	gvr         schema.GroupVersionResource
	subresource string
	namespace   string
	name        string
	path        string
}

// answer is the API server's answer to one review, and when it was given.
type answer struct {
	err error
	at  time.Time
}

// NewReviews asks its reviews through client.
func NewReviews(client authorizationclient.AuthorizationV1Interface) *Reviews {
	return &Reviews{client: client}
}

// Asked counts the reviews asked of the API server.
func (r *Reviews) Asked() int64 { return r.asked.Load() }

// Expire makes answers expire after a minute (on) or keeps them until
// Invalidate (off, once RBAC changes are watched).
func (r *Reviews) Expire(on bool) { r.expire.Store(on) }

// Invalidate forgets every answer: RBAC changed.
func (r *Reviews) Invalidate() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	clear(r.answers)
}

func (r *Reviews) lookup(k key) (gen uint64, ok bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	got, ok := r.answers[k]
	if ok && r.expire.Load() && time.Since(got.at) > unwatchedAnswerAge {
		delete(r.answers, k)
		ok = false
	}
	return r.gen, ok, got.err
}

func (r *Reviews) store(k key, gen uint64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen != r.gen {
		return // RBAC changed while it was asked
	}
	if r.answers == nil {
		r.answers = map[key]answer{}
	}
	r.answers[k] = answer{err: err, at: time.Now()}
}

// May asks whether sa (nil: Sprout itself) may verb gvr in namespace ("" for
// every namespace, or a cluster-scoped resource), from the cache or, the
// first time since RBAC changed, the API server. A denial is a
// *DeniedError; a review that could not be asked is not kept.
//
// A question about an account is a question about what Sprout may do as
// that account: unless Sprout may impersonate it, the answer is that
// Sprout may not, whatever the account's own rights, since Sprout would
// read with its own rights in the account's name.
func (r *Reviews) May(ctx context.Context, sa *Account, verb string, gvr schema.GroupVersionResource, namespace string) error {
	k := key{verb: verb, gvr: gvr, namespace: namespace}
	if sa != nil {
		if err := r.MayImpersonate(ctx, *sa); err != nil {
			return err
		}
		k.account = *sa
	}
	return r.ask(ctx, sa, k)
}

// Holds asks whether sa (nil: Sprout itself) holds the permission q in
// namespace ("" for every namespace), as May does: the first time since
// RBAC changed, the API server answers.
func (r *Reviews) Holds(ctx context.Context, sa *Account, q Request, namespace string) error {
	k := key{verb: q.Verb, gvr: schema.GroupVersionResource{Group: q.Group, Resource: q.Resource},
		subresource: q.Subresource, namespace: namespace, name: q.Name, path: q.Path}
	if q.Path != "" {
		k.namespace = "" // URLs have no namespace
	}
	if sa != nil {
		if err := r.MayImpersonate(ctx, *sa); err != nil {
			return err
		}
		k.account = *sa
	}
	return r.ask(ctx, sa, k)
}

// serviceAccounts is the resource impersonation of an account is asked on.
var serviceAccounts = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}

// MayImpersonate asks whether Sprout may impersonate sa: act as it, writes
// and reads alike. Without it a policy naming sa may do nothing.
func (r *Reviews) MayImpersonate(ctx context.Context, sa Account) error {
	return r.ask(ctx, nil, key{verb: "impersonate", gvr: serviceAccounts, namespace: sa.Namespace, name: sa.Name})
}

// ask answers k for sa from the cache or, the first time since RBAC
// changed, the API server.
func (r *Reviews) ask(ctx context.Context, sa *Account, k key) error {
	gen, ok, err := r.lookup(k)
	if ok {
		return err
	}
	err = r.review(ctx, sa, k)
	var denied *DeniedError
	if err == nil || errors.As(err, &denied) {
		r.store(k, gen, err)
	}
	return err
}

// review asks the API server: a SelfSubjectAccessReview for Sprout, a
// SubjectAccessReview for an account it impersonates.
func (r *Reviews) review(ctx context.Context, sa *Account, k key) error {
	r.asked.Add(1)
	verb, gvr, namespace := k.verb, k.gvr, k.namespace
	var attrs *authorizationv1.ResourceAttributes
	var urlAttrs *authorizationv1.NonResourceAttributes
	if k.path != "" {
		urlAttrs = &authorizationv1.NonResourceAttributes{Path: k.path, Verb: verb}
	} else {
		attrs = &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: gvr.Group, Version: gvr.Version,
			Resource: gvr.Resource, Subresource: k.subresource, Name: k.name}
	}
	var allowed bool
	who := "Sprout"
	if sa == nil {
		got, err := r.client.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: attrs, NonResourceAttributes: urlAttrs}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("access review for Sprout: %w", err)
		}
		allowed = got.Status.Allowed
	} else {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: sa.User(), Groups: sa.Groups(), ResourceAttributes: attrs, NonResourceAttributes: urlAttrs,
		}}
		got, err := r.client.SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("access review for ServiceAccount %s: %w", sa, err)
		}
		allowed, who = got.Status.Allowed, "ServiceAccount "+sa.String()
	}
	switch {
	case allowed:
	case k.verb == "impersonate" && k.gvr == serviceAccounts:
		return &DeniedError{fmt.Sprintf("%s may not impersonate ServiceAccount %s/%s (it needs impersonate on serviceaccounts there to act as it)", who, namespace, k.name)}
	case k.path != "" || k.subresource != "" || k.name != "" || gvr.Version == "":
		// A permission a role grants (Holds).
		q := Request{Verb: verb, Group: gvr.Group, Resource: gvr.Resource, Subresource: k.subresource, Name: k.name, Path: k.path}
		return &DeniedError{fmt.Sprintf("%s may not %s%s", who, q, where(namespace, k.path != ""))}
	default:
		return &DeniedError{fmt.Sprintf("%s may not %s %s%s", who, verb, ResourceName(gvr), where(namespace, false))}
	}
	return nil
}

// where says where a review asked, for its denial.
func where(namespace string, url bool) string {
	switch {
	case url:
		return ""
	case namespace == "":
		return " in every namespace"
	}
	return " in namespace " + namespace
}

// MayWatch checks that Sprout, whose informers watch, and sa, if any, may
// list and watch gvr in namespace.
//
// The reviews are asked at once: a policy's triggers are watched once they
// are answered, and a start waited for each in turn. The error is the
// first in the order Sprout's, then sa's, each verb in WatchVerbs' order.
func (r *Reviews) MayWatch(ctx context.Context, sa *Account, gvr schema.GroupVersionResource, namespace string) error {
	whom := []*Account{nil}
	if sa != nil {
		whom = append(whom, sa)
	}
	errs := make([]error, len(whom)*len(WatchVerbs))
	var wg sync.WaitGroup
	for i, who := range whom {
		for j, verb := range WatchVerbs {
			wg.Go(func() { errs[i*len(WatchVerbs)+j] = r.May(ctx, who, verb, gvr, namespace) })
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Need is what a policy needs on one resource in one namespace ("" for
// every one).
type Need struct {
	GVR       schema.GroupVersionResource
	Namespace string
	// Verbs are what its account (Sprout, when it has none) needs.
	Verbs []string
	// SproutNamespace is where Sprout, when the policy has an account,
	// needs WatchVerbs, its informers watching for it; nil: nowhere.
	SproutNamespace *string
}

// Check asks every review needs names for sa, from the cache. It returns
// nil when everything is granted, else one error naming, in Kyverno's
// words, each verb and resource missing and each review that failed.
func (r *Reviews) Check(ctx context.Context, sa *Account, needs []Need) error {
	var missing []string
	var failed []error
	ask := func(who *Account, verbs []string, gvr schema.GroupVersionResource, ns string) {
		for _, verb := range verbs {
			err := r.May(ctx, who, verb, gvr, ns)
			var denied *DeniedError
			switch {
			case errors.As(err, &denied):
				missing = append(missing, denied.msg)
			case err != nil:
				failed = append(failed, err)
			}
		}
	}
	for _, n := range needs {
		if sa != nil && n.SproutNamespace != nil {
			ask(nil, WatchVerbs, n.GVR, *n.SproutNamespace)
		}
		ask(sa, n.Verbs, n.GVR, n.Namespace)
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

// DeniedError is the API server's answer that an account may not do
// something, as opposed to a review that could not be asked.
type DeniedError struct{ msg string }

func (e *DeniedError) Error() string { return e.msg }

// ResourceName names gvr as Sprout's messages do: resource.version.group.
func ResourceName(gvr schema.GroupVersionResource) string {
	return strings.TrimSuffix(gvr.Resource+"."+gvr.Version+"."+gvr.Group, ".")
}
