package report

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// A policy that syncs many times a second tells each sync that wrote in an
// Event. The sparing recorder passes on what client-go's own correlator
// would send and no more: the Events it drops are never made.
const reasonGenerated = "Generated"

func TestSparingRecorderPassesWhatClientGoWouldSend(t *testing.T) {
	policy := &corev1.ObjectReference{APIVersion: "policies.kyverno.io/v1", Kind: "GeneratingPolicy", Name: "copy", UID: "p1"}
	other := &corev1.ObjectReference{APIVersion: "policies.kyverno.io/v1", Kind: "GeneratingPolicy", Name: "other", UID: "p2"}
	trigger := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "t1"}}
	type sent struct {
		obj       string
		eventtype string
	}
	var events []sent
	for i := range 100 {
		events = append(events, sent{"policy", corev1.EventTypeNormal})
		if i%2 == 0 {
			events = append(events, sent{"other", corev1.EventTypeNormal}, sent{"trigger", corev1.EventTypeNormal})
		}
		if i%3 == 0 {
			events = append(events, sent{"policy", corev1.EventTypeWarning})
		}
	}
	objects := map[string]*corev1.ObjectReference{"policy": policy, "other": other,
		"trigger": {APIVersion: "v1", Kind: "Namespace", Name: trigger.Name, UID: trigger.UID}}

	inner := record.NewFakeRecorder(len(events))
	r := NewSparingRecorder(inner)
	correlator := record.NewEventCorrelator(clocktesting.NewFakeClock(time.Now()))
	want := map[sent]int{}
	for i, e := range events {
		ref := objects[e.obj]
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("e%d", i), Namespace: "default"},
			InvolvedObject: *ref, Type: e.eventtype, Reason: "Generated", Message: fmt.Sprintf("created 1: ConfigMap/ns/x-%d", i),
			Source: corev1.EventSource{Component: "sprout"},
		}
		if res, err := correlator.EventCorrelate(ev); err != nil {
			t.Fatal(err)
		} else if !res.Skip {
			want[e]++
		}
		if e.obj == "trigger" {
			r.Eventf(trigger, e.eventtype, reasonGenerated, "created 1: ConfigMap/ns/x-%d", i)
		} else {
			r.Event(ref, e.eventtype, reasonGenerated, fmt.Sprintf("created 1: ConfigMap/ns/x-%d", i))
		}
	}
	if len(inner.Events) != want[sent{"policy", corev1.EventTypeNormal}]+want[sent{"other", corev1.EventTypeNormal}]+
		want[sent{"trigger", corev1.EventTypeNormal}]+want[sent{"policy", corev1.EventTypeWarning}] {
		t.Errorf("the recorder was handed %d Events, client-go's correlator sends %v", len(inner.Events), want)
	}
	if want[sent{"policy", corev1.EventTypeNormal}] != eventSpamBurst || want[sent{"policy", corev1.EventTypeWarning}] != eventSpamBurst {
		t.Errorf("client-go's correlator sent %v: its burst is no longer %d", want, eventSpamBurst)
	}
}
