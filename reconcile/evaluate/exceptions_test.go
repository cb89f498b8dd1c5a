package evaluate

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/sources"
)

func exception(t *testing.T, namespace, name string, expires *time.Time, policies ...string) sources.Exception {
	t.Helper()
	e := &apiv1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	for _, p := range policies {
		e.Spec.PolicyRefs = append(e.Spec.PolicyRefs, apiv1.PolicyRef{Kind: apiv1.GeneratingPolicyKind, Name: p})
	}
	if expires != nil {
		e.Spec.ExpiresAt = &metav1.Time{Time: *expires}
	}
	x := sources.CompileException(e, "test")
	if x.Err != nil {
		t.Fatal(x.Err)
	}
	return x
}

func generatingPolicy(name string) apiv1.Policy {
	return &apiv1.GeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// TestExceptionsAreKeptUntilTheyChange: a policy's set is made once and
// kept, the same pointer, until an exception that names it changes and the
// caller forgets it; a change that names another policy leaves it be.
func TestExceptionsAreKeptUntilTheyChange(t *testing.T) {
	e := New(Config{Exceptions: true})
	p, key := generatingPolicy("p"), policy.Key{Kind: apiv1.GeneratingPolicyKind, Name: "p"}
	var kept PolicyExceptions
	if s := e.exceptionsFor(&kept, key, p); s != nil {
		t.Fatalf("before any source handed its exceptions: %v, want nil", s)
	}
	a := exception(t, "ns", "a", nil, "p")
	if named := e.TakeExceptions("git", []sources.Exception{a}); !named(key) {
		t.Fatal("a new exception naming p: p not named")
	}
	kept.Forget()
	first := e.exceptionsFor(&kept, key, p)
	if len(first.ExceptionList()) != 1 || e.exceptionsFor(&kept, key, p) != first {
		t.Fatalf("set %v, not kept", first)
	}
	other := exception(t, "ns", "b", nil, "q")
	if named := e.TakeExceptions("git", []sources.Exception{a, other}); named(key) {
		t.Error("an exception naming q: p named")
	}
	if e.exceptionsFor(&kept, key, p) != first {
		t.Error("a change for another policy made p's set again")
	}
	if named := e.TakeExceptions("git", []sources.Exception{other}); !named(key) {
		t.Fatal("the exception naming p gone: p not named")
	}
	kept.Forget()
	if s := e.exceptionsFor(&kept, key, p); s == first || len(s.ExceptionList()) != 0 {
		t.Errorf("after a forgets: %v, want a new empty set", s)
	}
	if s := e.exceptionsFor(nil, key, p); s == nil {
		t.Error("a policy that keeps nothing: no set")
	}
}

// TestExceptionsOffOrOutsideTheirNamespace: off, no exception is taken
// and no set made; on, those outside ExceptionNamespace are left out.
func TestExceptionsOffOrOutsideTheirNamespace(t *testing.T) {
	p, key := generatingPolicy("p"), policy.Key{Kind: apiv1.GeneratingPolicyKind, Name: "p"}
	off := New(Config{})
	if off.TakeExceptions("git", []sources.Exception{exception(t, "ns", "a", nil, "p")})(key) || off.exceptionsFor(&PolicyExceptions{}, key, p) != nil {
		t.Error("exceptions off: taken")
	}
	on := New(Config{Exceptions: true, ExceptionNamespace: "kyverno"})
	if on.TakeExceptions("git", []sources.Exception{exception(t, "ns", "a", nil, "p")})(key) {
		t.Error("an exception outside ExceptionNamespace: taken")
	}
	on.TakeExceptions("git", []sources.Exception{exception(t, "ns", "a", nil, "p"), exception(t, "kyverno", "b", nil, "p")})
	if s := on.exceptionsFor(&PolicyExceptions{}, key, p); len(s.ExceptionList()) != 1 {
		t.Errorf("set %v, want b alone", s.ExceptionList())
	}
}

// TestAnExpiredExceptionRequeuesItsPolicy: a set with an exception that
// expires is made again after it, and the policy is queued then.
func TestAnExpiredExceptionRequeuesItsPolicy(t *testing.T) {
	queued := make(chan policy.Key, 1)
	e := New(Config{Exceptions: true, Requeue: func(key policy.Key) { queued <- key }})
	p, key := generatingPolicy("p"), policy.Key{Kind: apiv1.GeneratingPolicyKind, Name: "p"}
	soon := time.Now().Add(50 * time.Millisecond)
	e.TakeExceptions("git", []sources.Exception{exception(t, "ns", "a", &soon, "p")})
	var kept PolicyExceptions
	if s := e.exceptionsFor(&kept, key, p); len(s.ExceptionList()) != 1 || !s.Until.Equal(soon) {
		t.Fatalf("set %v until %v, want a until %v", s.ExceptionList(), s.Until, soon)
	}
	select {
	case got := <-queued:
		if got != key {
			t.Errorf("queued %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not queued once the exception expired")
	}
	if s := e.exceptionsFor(&kept, key, p); len(s.ExceptionList()) != 0 {
		t.Errorf("after it expired: %v", s.ExceptionList())
	}
}

// TestSkipsAreToldOncePerSet: what exceptions skipped is told when it
// differs from what was told last, naming at most so many triggers.
func TestSkipsAreToldOncePerSet(t *testing.T) {
	skipped := func(names ...string) Skipped {
		s := Skipped{}
		for _, n := range names {
			o, err := cluster.Triggers.FromList(configMap("team", n, nil))
			if err != nil {
				t.Fatal(err)
			}
			s.Add(policy.Trigger{GVR: configMaps, Object: o}, []string{"ns/" + n})
		}
		return s
	}
	var kept PolicyExceptions
	msg, tell := kept.Tell(skipped("b", "a", "c"), 2)
	want := "3 trigger(s) skipped due to policy exceptions: ConfigMap team/a (PolicyException ns/a); ConfigMap team/b (PolicyException ns/b) and 1 more"
	if !tell || msg != want {
		t.Errorf("told %v %q, want %q", tell, msg, want)
	}
	if _, tell := kept.Tell(skipped("c", "a", "b"), 2); tell {
		t.Error("the same skips told again")
	}
	if _, tell := kept.Tell(Skipped{}, 2); tell {
		t.Error("no skip told")
	}
	if _, tell := kept.Tell(skipped("a"), 2); !tell {
		t.Error("new skips not told")
	}
	if _, tell := (*PolicyExceptions)(nil).Tell(skipped("a"), 2); !tell {
		t.Error("a policy that keeps nothing: not told")
	}
	if uid := types.UID("uid-a"); !strings.Contains(skipped("a")[string(uid)].trigger, "team/a") {
		t.Error("skips not kept by the trigger's UID")
	}
}
