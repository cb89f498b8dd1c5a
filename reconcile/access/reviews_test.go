package access

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	k8stesting "k8s.io/client-go/testing"
)

var configmaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// authorizer answers access reviews as allow says, counting them.
func authorizer(allow func(user string, attrs *authorizationv1.ResourceAttributes) bool) (*fake.Clientset, *atomic.Int64) {
	kube := fake.NewClientset()
	var asked atomic.Int64
	answer := func(action k8stesting.Action) (bool, runtime.Object, error) {
		asked.Add(1)
		switch r := action.(k8stesting.CreateAction).GetObject().(type) {
		case *authorizationv1.SubjectAccessReview:
			r.Status.Allowed = allow(r.Spec.User, r.Spec.ResourceAttributes)
			return true, r, nil
		case *authorizationv1.SelfSubjectAccessReview:
			r.Status.Allowed = allow("sprout", r.Spec.ResourceAttributes)
			return true, r, nil
		}
		return false, nil, nil
	}
	kube.PrependReactor("create", "subjectaccessreviews", answer)
	kube.PrependReactor("create", "selfsubjectaccessreviews", answer)
	return kube, &asked
}

// TestReviewsKeepAnswersUntilRBACChanges: a review is asked of the API
// server once, then answered from the cache, until Invalidate; a denial
// names who may not do what, where.
func TestReviewsKeepAnswersUntilRBACChanges(t *testing.T) {
	allowed := true
	kube, asked := authorizer(func(user string, _ *authorizationv1.ResourceAttributes) bool { return allowed || user == "sprout" })
	r := NewReviews(kube.AuthorizationV1())
	sa := &Account{Namespace: "team", Name: "deployer"}
	ctx := context.Background()
	for range 3 {
		if err := r.May(ctx, sa, "list", configmaps, "team"); err != nil {
			t.Fatal(err)
		}
	}
	// Once whether Sprout may impersonate the account, once the question.
	if asked.Load() != 2 || r.Asked() != 2 {
		t.Errorf("three questions asked the API server %d times (counted %d), want twice", asked.Load(), r.Asked())
	}
	allowed = false
	if err := r.May(ctx, sa, "list", configmaps, "team"); err != nil {
		t.Errorf("before RBAC changed, the kept answer changed: %v", err)
	}
	r.Invalidate()
	err := r.May(ctx, sa, "list", configmaps, "team")
	if want := "ServiceAccount team/deployer may not list configmaps.v1 in namespace team"; err == nil || err.Error() != want {
		t.Errorf("after RBAC changed: %v, want %q", err, want)
	}
	if err := r.May(ctx, nil, "list", configmaps, ""); err != nil {
		t.Errorf("Sprout's own review: %v", err)
	}
}

// TestNoQuestionAsAnAccountSproutMayNotImpersonate: what an account may
// do is never asked, nor answered yes, when Sprout may not impersonate it:
// every question as that account is answered with what Sprout lacks,
// naming the account.
func TestNoQuestionAsAnAccountSproutMayNotImpersonate(t *testing.T) {
	var askedAsAccount atomic.Int64
	kube, _ := authorizer(func(user string, a *authorizationv1.ResourceAttributes) bool {
		if user != "sprout" {
			askedAsAccount.Add(1)
			return true // the account itself may do anything
		}
		return !(a.Verb == "impersonate" && a.Name == "powerful")
	})
	r := NewReviews(kube.AuthorizationV1())
	ctx := context.Background()
	err := r.May(ctx, &Account{Namespace: "team", Name: "powerful"}, "get", configmaps, "team")
	want := "Sprout may not impersonate ServiceAccount team/powerful"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a read as an account Sprout may not impersonate: %v, want %q", err, want)
	}
	if err := r.MayWatch(ctx, &Account{Namespace: "team", Name: "powerful"}, configmaps, "team"); err == nil {
		t.Error("a watch as an account Sprout may not impersonate is allowed")
	}
	if n := askedAsAccount.Load(); n != 0 {
		t.Errorf("the account was asked about %d times", n)
	}
	if err := r.May(ctx, &Account{Namespace: "team", Name: "deployer"}, "get", configmaps, "team"); err != nil {
		t.Errorf("an account Sprout may impersonate: %v", err)
	}
}

// TestReviewsCheckNamesEveryMissingVerb: Check asks Sprout for what its
// informers need and the account for the rest, and names, in Kyverno's
// words, each verb missing, once.
func TestReviewsCheckNamesEveryMissingVerb(t *testing.T) {
	kube, _ := authorizer(func(user string, a *authorizationv1.ResourceAttributes) bool {
		return user == "sprout" || a.Verb == "get" || a.Verb == "list" || a.Verb == "watch"
	})
	r := NewReviews(kube.AuthorizationV1())
	sa := &Account{Namespace: "team", Name: "deployer"}
	ns := "team"
	err := r.Check(context.Background(), sa, []Need{
		{GVR: configmaps, Namespace: ns, Verbs: ReadVerbs, SproutNamespace: &ns},
		{GVR: configmaps, Namespace: ns, Verbs: WriteVerbs, SproutNamespace: &ns},
	})
	want := "Policy is not ready for reporting, missing permissions: " +
		"ServiceAccount team/deployer may not create configmaps.v1 in namespace team; " +
		"ServiceAccount team/deployer may not delete configmaps.v1 in namespace team; " +
		"ServiceAccount team/deployer may not patch configmaps.v1 in namespace team."
	if err == nil || err.Error() != want {
		t.Errorf("Check: %v\nwant %s", err, want)
	}
	if err := r.Check(context.Background(), sa, []Need{{GVR: configmaps, Namespace: ns, Verbs: ReadVerbs}}); err != nil {
		t.Errorf("Check of what is granted: %v", err)
	}
}

// TestReviewAskedAcrossAnRBACChangeIsNotKept: an answer the API server gave
// before an RBAC change, and that arrives after it, is used once but not
// kept.
func TestReviewAskedAcrossAnRBACChangeIsNotKept(t *testing.T) {
	var r *Reviews
	kube, asked := authorizer(func(string, *authorizationv1.ResourceAttributes) bool {
		if r.Asked() == 1 {
			r.Invalidate() // RBAC changes while the first review is asked
		}
		return true
	})
	r = NewReviews(kube.AuthorizationV1())
	for range 2 {
		if err := r.May(context.Background(), nil, "list", configmaps, ""); err != nil {
			t.Fatal(err)
		}
	}
	if asked.Load() != 2 {
		t.Errorf("asked %d times, want the answer given across a change asked again", asked.Load())
	}
}

// TestAccountNames: how an account is named to the API server, and the
// flag each wrong accounts option is named by.
func TestAccountNames(t *testing.T) {
	a := Account{Namespace: "team", Name: "deployer"}
	if a.User() != "system:serviceaccount:team:deployer" || a.String() != "team/deployer" ||
		!strings.Contains(strings.Join(a.Groups(), ","), "system:serviceaccounts:team") {
		t.Errorf("account names: %s %s %v", a.User(), a, a.Groups())
	}
	if err := (Accounts{Default: "Not_A_Name"}).Validate(); err == nil || !strings.Contains(err.Error(), "--default-service-account") {
		t.Errorf("an invalid default: %v", err)
	}
	if err := (Accounts{Namespaces: []string{"a/b"}}).Validate(); err == nil || !strings.Contains(err.Error(), "--service-account-namespaces") {
		t.Errorf("an invalid namespace: %v", err)
	}
}

// TestMayWatchAsksAtOnce: the reviews of a policy's triggers are asked at
// once, not one after the other: here no review is answered until
// Sprout's two have both been asked, and asked in turn they never would
// be. A denial is still the first in order: Sprout's, then the account's.
func TestMayWatchAsksAtOnce(t *testing.T) {
	both := make(chan struct{})
	reviews := &meetingReviews{SelfSubjectAccessReviewInterface: fake.NewClientset().AuthorizationV1().SelfSubjectAccessReviews(), meet: len(WatchVerbs), met: both}
	client := meetingClient{AuthorizationV1Interface: fake.NewClientset().AuthorizationV1(), reviews: reviews}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := NewReviews(client).MayWatch(ctx, nil, configmaps, "team")
	if want := "Sprout may not watch configmaps.v1 in namespace team"; err == nil || err.Error() != want {
		t.Errorf("MayWatch = %v, want %q", err, want)
	}
}

// meetingClient serves its SelfSubjectAccessReviews from reviews.
type meetingClient struct {
	authorizationv1client.AuthorizationV1Interface
	reviews *meetingReviews
}

func (c meetingClient) SelfSubjectAccessReviews() authorizationv1client.SelfSubjectAccessReviewInterface {
	return c.reviews
}

// meetingReviews answers no review until meet of them have been asked:
// then list is allowed, nothing else.
type meetingReviews struct {
	authorizationv1client.SelfSubjectAccessReviewInterface
	meet  int
	asked atomic.Int64
	met   chan struct{}
}

func (r *meetingReviews) Create(ctx context.Context, review *authorizationv1.SelfSubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SelfSubjectAccessReview, error) {
	if r.asked.Add(1) == int64(r.meet) {
		close(r.met)
	}
	select {
	case <-r.met:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	review.Status.Allowed = review.Spec.ResourceAttributes.Verb == "list"
	return review, nil
}
