package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// TestBoundedMessage: a message of many joined errors is cut below what a
// CRD accepts, at a rune boundary, saying so; a short one is kept whole.
func TestBoundedMessage(t *testing.T) {
	short := "trigger ConfigMap a/b: spec.generate[0].expression: no such key"
	if got := BoundedMessage(short); got != short {
		t.Errorf("a short message changed: %q", got)
	}
	long := strings.Repeat("trigger ConfigMap ünïcode/ñame: no such key\n", 2000)
	got := BoundedMessage(long)
	if len(got) > maxConditionMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "Sprout's log)") {
		t.Errorf("cut message: %d bytes, valid UTF-8 %v, ends %q", len(got), utf8.ValidString(got), got[len(got)-40:])
	}
}

// stalling is an error that says whether a retry may cure it.
type stalling struct{ stalls bool }

func (s stalling) Error() string { return "stalling" }
func (s stalling) Stalls() bool  { return s.stalls }

// TestStalledOutcomes: a failure no retry can cure is Stalled, and a
// failed match is Stalled only when a missing permission, and no outage of
// discovery, caused it, however the errors are joined and wrapped.
func TestStalledOutcomes(t *testing.T) {
	perm, down := stalling{true}, stalling{false}
	for _, tc := range []struct {
		name string
		out  Outcome
		want bool
	}{
		{"compile", Outcome{Reason: ReasonCompileFailed, Err: errors.New("x")}, true},
		{"evaluation", Outcome{Reason: ReasonEvaluationFailed, Err: errors.New("x")}, false},
		{"match, a permission", Outcome{Reason: ReasonMatchFailed, Err: fmt.Errorf("rules: %w", perm)}, true},
		{"match, discovery down", Outcome{Reason: ReasonMatchFailed, Err: down}, false},
		{"match, both", Outcome{Reason: ReasonMatchFailed, Err: errors.Join(fmt.Errorf("a: %w", perm), down)}, false},
		{"match, plain", Outcome{Reason: ReasonMatchFailed, Err: errors.New("x")}, false},
		{"apply forbidden", Outcome{Reason: ReasonApplyFailed,
			Err: fmt.Errorf("w: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "a", errors.New("no")))}, true},
	} {
		if got := tc.out.Stalled(); got != tc.want {
			t.Errorf("%s: Stalled() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStatusWritesOnlyWhatChanged: the patch an outcome gives a status
// that tells it already is nil; a failure for some triggers keeps Kyverno's
// ready true and names them; a refused permission makes it false.
func TestStatusWritesOnlyWhatChanged(t *testing.T) {
	p := &apiv1.GeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2}}
	live := &apiv1.GeneratingPolicyStatus{}
	ok := Outcome{Triggers: 3, Objects: 6}
	patch := Status(p, live, ok, &Verdict{})
	if patch == nil {
		t.Fatal("a first outcome wrote nothing")
	}
	body, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	var applied struct {
		Status apiv1.GeneratingPolicyStatus `json:"status"`
	}
	if err := json.Unmarshal(body, &applied); err != nil {
		t.Fatal(err)
	}
	if again := Status(p, &applied.Status, ok, &Verdict{}); again != nil {
		t.Errorf("the same outcome on the status it wrote patches again: %v", again)
	}
	perTrigger := Status(p, &applied.Status, Outcome{Reason: ReasonEvaluationFailed, Err: errors.New("t1: boom"), Triggers: 3, Failed: 1}, nil)
	b, _ := json.Marshal(perTrigger)
	if !strings.Contains(string(b), `"ready":true`) || !strings.Contains(string(b), "1 of its triggers failed: t1: boom") {
		t.Errorf("a failure of one trigger: %s", b)
	}
	denied := Status(p, &applied.Status, ok, &Verdict{Err: errors.New("missing permissions: x")})
	b, _ = json.Marshal(denied)
	if !strings.Contains(string(b), `"ready":false`) || !strings.Contains(string(b), "missing permissions: x") {
		t.Errorf("a refused permission: %s", b)
	}
}
