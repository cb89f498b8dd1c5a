package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/internal/wire"
)

// TestDecisionsPassOverOnlyWhatTheyComparedBefore: an object found
// unchanged is passed over while both it and its cached copy are the same;
// a cached copy replaced (someone edited the object) is compared again and
// found drifted. No request is possible: the Applier has no client.
func TestDecisionsPassOverOnlyWhatTheyComparedBefore(t *testing.T) {
	objects, live := desiredSet(3)
	memo := NewDecisions()
	opts := ApplyOptions{Synchronize: true}
	for round := range 2 {
		cs, err := applyRound(memo, objects, live, opts, nil)
		if err != nil || cs.Count(Unchanged) != 3 {
			t.Fatalf("round %d: %d unchanged, error %v", round, cs.Count(Unchanged), err)
		}
		if len(memo.unchanged) != 3 {
			t.Fatalf("round %d: %d pairs remembered, want 3", round, len(memo.unchanged))
		}
	}

	// An edit replaces the cached object: the pair is gone, the object is
	// compared, and the drift found (a write, which panics without a client:
	// caught as the proof that it was attempted).
	edit := edited(live[objects[0].GetName()], func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "changed", "data", "ZK_ADDRESS")
	})
	live[objects[0].GetName()] = edit
	if d := decideCached(objects[0], edit, opts); d.action != "" {
		t.Fatalf("the edited object decides %q without a write", d.action)
	}
	if _, ok := memo.get(objects[0], edit); ok {
		t.Error("a replaced cached object was passed over")
	}

	// A round forgets what it did not see.
	if _, err := applyRound(memo, objects[1:], live, opts, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := memo.unchanged[objects[0]]; ok || len(memo.unchanged) != 2 {
		t.Errorf("after a round without it, %d pairs remembered, first kept: %v", len(memo.unchanged), ok)
	}
}

// TestDecisionsStaleAgreesWithStale: with pairs remembered or not, the
// memo's Stale finds exactly what the plain comparison finds.
func TestDecisionsStaleAgreesWithStale(t *testing.T) {
	desired, live := desiredSet(50)
	memo := NewDecisions()
	opts := ApplyOptions{Synchronize: true}
	if _, err := applyRound(memo, desired, live, opts, nil); err != nil {
		t.Fatal(err)
	}
	var owned []*cluster.Object
	for _, o := range live {
		owned = append(owned, o)
	}
	// Stale ones: ten no longer desired. Not stale: a new cached copy of a
	// desired one, which replaced the paired one after the Apply (an edit
	// seen between apply and prune).
	fresh := edited(live[desired[20].GetName()], func(*unstructured.Unstructured) {})
	owned = slices.DeleteFunc(owned, func(o *cluster.Object) bool { return o.GetName() == fresh.GetName() })
	owned = append(owned, fresh)
	// And one created by the Apply (not cached then), cached by the prune.
	last := desired[49]
	delete(live, last.GetName())
	stillDesired := desired[10:]
	created := func(_ context.Context, obj *unstructured.Unstructured) (Change, error) {
		return changeOf(obj, Created, ""), nil
	}
	cs, err := applyRound(memo, stillDesired, live, opts, &writes{create: created})
	if err != nil || cs.Count(Created) != 1 {
		t.Fatalf("%d created, error %v", cs.Count(Created), err)
	}
	live[last.GetName()] = toCache(last)
	owned = slices.DeleteFunc(owned, func(o *cluster.Object) bool { return o.GetName() == last.GetName() })
	owned = append(owned, live[last.GetName()])
	names := func(objs []*cluster.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetName())
		}
		slices.Sort(out)
		return out
	}
	want, got := names(stale(owned, stillDesired)), names(memo.Stale(owned))
	if len(want) != 10 || !slices.Equal(got, want) {
		t.Errorf("memo's Stale: %v, plain: %v (want 10)", got, want)
	}
}

// TestDecisionsRememberWhatWasWrittenOverTheCache: after a write, the
// cached copy it replaced is not written over again while the cache still
// holds it; once the cache holds another copy, that one is compared.
func TestDecisionsRememberWhatWasWrittenOverTheCache(t *testing.T) {
	objects, live := desiredSet(1)
	edit := edited(live[objects[0].GetName()], func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "changed", "data", "ZK_ADDRESS")
		u.SetResourceVersion("10")
	})
	live[objects[0].GetName()] = edit
	memo := NewDecisions()
	opts := ApplyOptions{Synchronize: true}
	applied := 0
	w := writes{apply: func(_ context.Context, obj *unstructured.Unstructured, _ bool) (Change, error) {
		applied++
		ch := changeOf(obj, Configured, "")
		ch.ResourceVersion = "12"
		return ch, nil
	}}
	for round := range 2 {
		if _, err := applyRound(memo, objects, live, opts, &w); err != nil {
			t.Fatal(err)
		}
		if applied != 1 {
			t.Fatalf("round %d: %d writes, want 1", round, applied)
		}
	}
	// A copy between the one written over and the write (the hand-over's
	// patch) is from before the write too.
	live[objects[0].GetName()] = edited(edit, func(u *unstructured.Unstructured) { u.SetResourceVersion("11") })
	if _, err := applyRound(memo, objects, live, opts, &w); err != nil || applied != 1 {
		t.Fatalf("a copy from before the write: %d writes, error %v", applied, err)
	}
	// Another edit, after the write.
	live[objects[0].GetName()] = edited(edit, func(u *unstructured.Unstructured) { u.SetResourceVersion("13") })
	if _, err := applyRound(memo, objects, live, opts, &w); err != nil {
		t.Fatal(err)
	}
	if applied != 2 {
		t.Errorf("a new copy in the cache, still drifted, was not written: %d writes", applied)
	}

	// A dry run remembers nothing it did not write.
	dry := NewDecisions()
	w.dry = true
	for range 2 {
		if _, err := applyRound(dry, objects, live, opts, &w); err != nil {
			t.Fatal(err)
		}
	}
	if applied != 4 {
		t.Errorf("dry runs: %d diffs in all, want 4", applied)
	}
}

// TestSettledObjectsStandForTheirDesiredOnes: objects settle only once a
// round found every one unchanged in the cache, not while a write is
// unconfirmed. Settled, they are reported Unchanged without being given,
// and Stale counts them desired even when their cached copy was replaced
// after the Apply; Holds turns false as soon as the cache holds another
// version, so that their caller gives them in full again.
func TestSettledObjectsStandForTheirDesiredOnes(t *testing.T) {
	objects, live := desiredSet(4)
	memo := NewDecisions()
	opts := ApplyOptions{Synchronize: true, Round: memo.Begin()}
	if _, err := (&Applier{}).Apply(context.Background(), objects, live, opts); err != nil {
		t.Fatal(err)
	}
	// One written over its cached copy: not confirmed, so its set does not settle.
	memo.wrote(objects[3], live[objects[3].GetName()], "2")
	if settle(opts.Round, objects[3:]).Len() != 0 {
		t.Fatal("objects settled while the cache had yet to show a write")
	}
	opts.Round.End()
	opts.Round = memo.Begin()
	if settle(opts.Round, objects[:2]).Len() != 0 {
		t.Fatal("objects settled that the round was not given")
	}
	if _, err := (&Applier{}).Apply(context.Background(), objects[:3], live, opts); err != nil {
		t.Fatal(err)
	}
	settled := settle(opts.Round, objects[:2])
	opts.Round.End()
	if settled.Len() != 2 || !settled.Holds(live) {
		t.Fatalf("%d objects settled, holding %v: want 2 that hold", settled.Len(), settled.Holds(live))
	}

	// A round given the third in full and the first two settled reports
	// all three unchanged, and prunes only the fourth (no longer desired).
	opts.Settled = []Settled{settled}
	cs, err := applyRound(memo, objects[2:3], live, opts, nil)
	if err != nil || cs.Count(Unchanged) != 3 || len(cs.Changes) != 3 {
		t.Fatalf("%d changes, %d unchanged, error %v: want 3 unchanged", len(cs.Changes), cs.Count(Unchanged), err)
	}
	// The same version listed again (a relist) still holds; an edit does not.
	live[objects[1].GetName()] = edited(live[objects[1].GetName()], func(*unstructured.Unstructured) {})
	if !settled.Holds(live) {
		t.Error("settled objects do not hold after the same version was cached again")
	}
	live[objects[0].GetName()] = edited(live[objects[0].GetName()], func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "changed", "data", "ZK_ADDRESS")
		u.SetResourceVersion("2")
	})
	var owned []*cluster.Object
	for _, o := range live {
		owned = append(owned, o)
	}
	stale := memo.Stale(owned)
	if len(stale) != 1 || stale[0].GetName() != objects[3].GetName() {
		t.Errorf("stale: %d objects, want only %s", len(stale), objects[3].GetName())
	}
	if settled.Holds(live) {
		t.Error("settled objects still hold after their cached copy was replaced")
	}
}

// settle settles one group of objects.
func settle(r *Round, objects []*unstructured.Unstructured) Settled {
	return r.Settle(objects)[0]
}

// applyRound runs a round of memo with one Apply of objects, as a sync of
// one part does, through w's writes when w is given (with no client
// otherwise).
func applyRound(memo *Decisions, objects []*unstructured.Unstructured, live Live, opts ApplyOptions, w *writes) (ChangeSet, error) {
	opts.Round = memo.Begin()
	defer opts.Round.End()
	if w == nil {
		return (&Applier{}).Apply(context.Background(), objects, live, opts)
	}
	return (&Applier{}).each(context.Background(), objects, live, opts, *w)
}

// laggingCache is a cache that has or has not yet seen the versions asked.
type laggingCache struct {
	cachedObjects
	seen bool
}

func (c laggingCache) Seen(schema.GroupVersionKind, string) bool { return c.seen }

// TestDecisionsLeaveCreatedObjectsToTheCache: an object the last round
// created is not written again while the cache has yet to see the version
// its create made; once the cache has seen it without the object, the
// object was deleted meanwhile and is created again.
func TestDecisionsLeaveCreatedObjectsToTheCache(t *testing.T) {
	objects, _ := desiredSet(1)
	memo := NewDecisions()
	opts := ApplyOptions{Synchronize: true}
	creates := 0
	w := writes{create: func(_ context.Context, obj *unstructured.Unstructured) (Change, error) {
		creates++
		ch := changeOf(obj, Created, "")
		ch.ResourceVersion = "5"
		return ch, nil
	}}
	live := laggingCache{cachedObjects: cachedObjects{}}
	for round, want := range []Action{Created, Unchanged, Unchanged} {
		cs, err := applyRound(memo, objects, live, opts, &w)
		if err != nil || cs.Changes[0].Action != want || creates != 1 {
			t.Fatalf("round %d: %s after %d creates, error %v: want %s after 1", round, cs.Changes[0].Action, creates, err, want)
		}
	}
	live.seen = true
	if cs, err := applyRound(memo, objects, live, opts, &w); err != nil || cs.Changes[0].Action != Created || creates != 2 {
		t.Fatalf("after the cache passed the create: %s after %d creates, error %v: want created again", cs.Changes[0].Action, creates, err)
	}
}

// TestCreatedObjectsSettleAtOnce: objects the last round created as
// desired settle without waiting for the cache; one whose create did not
// make it as desired (no version) does not. Settled, they hold while the
// cache has yet to show them, adopt the cached copy of the version created,
// and stop holding once the cache shows another version, or has passed
// their version without them (deleted).
func TestCreatedObjectsSettleAtOnce(t *testing.T) {
	objects, cachedLater := desiredSet(3)
	memo := NewDecisions()
	opts := ApplyOptions{Synchronize: true}
	w := writes{create: func(_ context.Context, obj *unstructured.Unstructured) (Change, error) {
		ch := changeOf(obj, Created, "")
		if obj != objects[2] {
			ch.ResourceVersion = "1" // as cachedLater holds them
		}
		return ch, nil
	}}
	live := laggingCache{cachedObjects: cachedObjects{}}
	opts.Round = memo.Begin()
	if _, err := (&Applier{}).each(context.Background(), objects, live, opts, w); err != nil {
		t.Fatal(err)
	}
	groups := opts.Round.Settle(objects[2:], objects[:1], objects[1:2])
	opts.Round.End()
	if groups[0].Len() != 0 {
		t.Error("an object not created as desired settled")
	}
	settled := Settled{objects: append(groups[1].objects, groups[2].objects...)}
	if settled.Len() != 2 || !settled.Pending() {
		t.Fatalf("created objects: %d settled, pending %v: want 2 pending", settled.Len(), settled.Pending())
	}
	if !settled.Holds(live) {
		t.Error("objects created, not cached yet, do not hold")
	}
	if _, ok := memo.unchanged[objects[0]]; ok || len(memo.objects) != 1 {
		t.Errorf("after settling, %d desired objects held, the first's pair kept: %v; want only the one not settled", len(memo.objects), ok)
	}
	live.cachedObjects[objects[0].GetName()] = cachedLater[objects[0].GetName()]
	live.cachedObjects[objects[1].GetName()] = cachedLater[objects[1].GetName()]
	if !settled.Holds(live) || settled.Pending() {
		t.Errorf("cached as created: holds %v, pending %v; want held, adopted", settled.Holds(live), settled.Pending())
	}
	live.cachedObjects[objects[1].GetName()] = edited(cachedLater[objects[1].GetName()], func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "changed", "data", "ZK_ADDRESS")
		u.SetResourceVersion("2")
	})
	if settled.Holds(live) {
		t.Error("settled objects hold after one changed")
	}

	again := groups[1] // the first alone
	delete(live.cachedObjects, objects[0].GetName())
	live.seen = true
	if again.Holds(live) {
		t.Error("a settled object the cache no longer holds still holds")
	}
}

// TestCreatedAsDesired: a create's answer gives its version only when the
// object made holds every desired field.
func TestCreatedAsDesired(t *testing.T) {
	objects, _ := desiredSet(1)
	made := objects[0].DeepCopy()
	made.SetResourceVersion("42")
	made.SetUID("u")
	answer, err := json.Marshal(made.Object)
	if err != nil {
		t.Fatal(err)
	}
	if v := createdAsDesired(answer, nil, objects[0]); v != "42" {
		t.Errorf("as desired: version %q, want 42", v)
	}
	_ = unstructured.SetNestedField(made.Object, "webhook", "data", "ZK_ADDRESS")
	if answer, err = json.Marshal(made.Object); err != nil {
		t.Fatal(err)
	}
	if v := createdAsDesired(answer, nil, objects[0]); v != "" {
		t.Errorf("a field changed by the create: version %q, want none", v)
	}
	if v := createdAsDesired([]byte("not json"), nil, objects[0]); v != "" {
		t.Errorf("an answer that does not decode: version %q, want none", v)
	}
	// As the API server answers: with managed fields, which are cut.
	if v := createdAsDesired(createAnswer(t, objects[0]), nil, objects[0]); v != "42" {
		t.Errorf("an answer with managed fields: version %q, want 42", v)
	}

	// The answer to a protobuf create is protobuf: compared with the body
	// sent when there is one, else read as JSON; both read it alike.
	sent, contentType, err := createBody(objects[0])
	if err != nil || contentType != runtime.ContentTypeProtobuf {
		t.Fatalf("create body: %s, %v; want protobuf", contentType, err)
	}
	withLabel := objects[0].DeepCopy()
	labels := withLabel.GetLabels()
	labels["added-by"] = "webhook"
	withLabel.SetLabels(labels)
	added := createAnswer(t, withLabel)
	other := objects[0].DeepCopy()
	other.SetKind("Secret")
	for _, tc := range []struct {
		name    string
		answer  []byte
		desired *unstructured.Unstructured
		want    string
	}{
		{"as sent", protobufAnswer(t, createAnswer(t, objects[0])), objects[0], "42"},
		{"a field changed", protobufAnswer(t, answer), objects[0], ""},
		{"a field added", protobufAnswer(t, added), objects[0], "42"},
		{"another kind", protobufAnswer(t, createAnswer(t, objects[0])), other, ""},
		{"does not decode", append(slices.Clone(wire.Prefix), "not protobuf"...), objects[0], ""},
	} {
		for _, sent := range [][]byte{sent, nil} {
			if v := createdAsDesired(tc.answer, sent, tc.desired); v != tc.want {
				t.Errorf("a protobuf answer, %s, %d bytes sent: version %q, want %q", tc.name, len(sent), v, tc.want)
			}
		}
	}
	if v, ok := madeAsSent(protobufAnswer(t, createAnswer(t, objects[0])), sent, objects[0].GroupVersionKind()); !ok || v != "42" {
		t.Errorf("the answer made as sent: %q, %v; want 42 by the comparison with what was sent", v, ok)
	}
	if _, ok := madeAsSent(protobufAnswer(t, added), sent, objects[0].GroupVersionKind()); ok {
		t.Error("an answer with a label added was found made as sent")
	}
}

// TestMadeAsSentComparesTheEncodings: the answer to a protobuf create is
// compared with the body sent without decoding either; only what the API
// server sets on every create may differ, and only when the body sent left
// it empty; anything that is not such a body is not found made as sent.
func TestMadeAsSentComparesTheEncodings(t *testing.T) {
	objects, _ := desiredSet(1)
	desired := objects[0]
	gvk := desired.GroupVersionKind()
	sent, _, err := createBody(desired)
	if err != nil {
		t.Fatal(err)
	}
	answer := protobufAnswer(t, createAnswer(t, desired))
	if v, ok := madeAsSent(answer, sent, gvk); !ok || v != "42" {
		t.Fatalf("as sent: %q, %v; want 42", v, ok)
	}

	withUID := desired.DeepCopy()
	withUID.SetUID("0b5e3e2a-6a52-4b6f-8a38-7a3c7d1e9f10") // the answer's
	sentUID, _, err := createBody(withUID)
	if err != nil {
		t.Fatal(err)
	}
	otherKind := gvk
	otherKind.Kind = "Secret"
	unversioned := desired.DeepCopy()
	unversioned.SetResourceVersion("")
	annotated := desired.DeepCopy()
	annotated.SetAnnotations(map[string]string{"by": "webhook"})
	for _, tc := range []struct {
		name         string
		answer, sent []byte
		gvk          schema.GroupVersionKind
	}{
		{"a body sent with a uid, even the one made", answer, sentUID, gvk},
		{"another kind asked for", answer, sent, otherKind},
		{"an annotation added", protobufAnswer(t, createAnswerOf(t, annotated, "42")), sent, gvk},
		{"an answer without a version", protobufAnswer(t, createAnswerOf(t, unversioned, "")), sent, gvk},
		{"a cut answer", answer[:len(answer)-3], sent, gvk},
		{"a cut body", answer, sent[:len(sent)-3], gvk},
		{"no prefix", answer[len(wire.Prefix):], sent, gvk},
		{"JSON", createAnswer(t, desired), sent, gvk},
	} {
		if v, ok := madeAsSent(tc.answer, tc.sent, tc.gvk); ok {
			t.Errorf("%s: made as sent, version %q", tc.name, v)
		}
	}
}

// protobufAnswer is a JSON answer as the API server sends it to a client
// that accepts protobuf.
func protobufAnswer(t testing.TB, answer []byte) []byte {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(answer, &u.Object); err != nil {
		t.Fatal(err)
	}
	typed, err := clientgoscheme.Scheme.New(u.GroupVersionKind())
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := protobufCodec.Encode(typed, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRoundStopsTryingOnceTheAPIServerIsDown: once a write of a round's
// Apply says that the API server cannot serve, the objects of its later
// Apply calls fail without a request, as those of the same call do.
func TestRoundStopsTryingOnceTheAPIServerIsDown(t *testing.T) {
	objects, _ := desiredSet(40)
	var calls atomic.Int32
	w := writes{create: func(context.Context, *unstructured.Unstructured) (Change, error) {
		calls.Add(1)
		return Change{}, apierrors.NewServiceUnavailable("down")
	}}
	live := laggingCache{cachedObjects: cachedObjects{}}
	opts := ApplyOptions{Synchronize: true, Round: NewDecisions().Begin()}
	if _, err := (&Applier{}).each(context.Background(), objects[:20], live, opts, w); err == nil {
		t.Fatal("the first part: no error")
	}
	first := calls.Load()
	cs, err := (&Applier{}).each(context.Background(), objects[20:], live, opts, w)
	if err == nil || cs.Count(Failed) != 20 || calls.Load() != first {
		t.Errorf("the next part: %d failed, %d more requests, error %v; want 20 failed without a request", cs.Count(Failed), calls.Load()-first, err)
	}
	if _, err := (&Applier{}).each(context.Background(), objects[20:], live, ApplyOptions{Synchronize: true, Round: NewDecisions().Begin()}, w); err == nil || calls.Load() == first {
		t.Errorf("a new round made no request: %d", calls.Load()-first)
	}
}

// TestRoundBoundsTheRequestsOfItsApplies: Apply calls of one round that run
// at once share its bound on requests in flight, so that the next part of
// a sync fills the slots the last one frees and no more. With every create
// held, the second call starts none: it waits for a slot.
func TestRoundBoundsTheRequestsOfItsApplies(t *testing.T) {
	objects, _ := desiredSet(4 * applyParallelism)
	var inFlight, most atomic.Int32
	release := make(chan struct{})
	w := writes{create: func(_ context.Context, obj *unstructured.Unstructured) (Change, error) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		inFlight.Add(-1)
		return changeOf(obj, Created, ""), nil
	}}
	live := laggingCache{cachedObjects: cachedObjects{}}
	opts := ApplyOptions{Synchronize: true, Round: NewDecisions().Begin()}
	var wg sync.WaitGroup
	for _, part := range [][]*unstructured.Unstructured{objects[:2*applyParallelism], objects[2*applyParallelism:]} {
		wg.Go(func() {
			if _, err := (&Applier{}).each(context.Background(), part, live, opts, w); err != nil {
				t.Error(err)
			}
		})
	}
	full := func(context.Context) (bool, error) { return inFlight.Load() >= applyParallelism, nil }
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, full); err != nil {
		t.Fatalf("%d creates under way, want %d", inFlight.Load(), applyParallelism)
	}
	// Both calls are running; a call with slots of its own would start its
	// creates at once. Nothing may pass the bound while they are held.
	more := func(context.Context) (bool, error) { return inFlight.Load() > applyParallelism, nil }
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 200*time.Millisecond, true, more); err == nil {
		t.Errorf("%d creates under way in one round, more than its %d slots", inFlight.Load(), applyParallelism)
	}
	close(release)
	wg.Wait()
	if most.Load() != applyParallelism {
		t.Errorf("at most %d creates at once, want %d", most.Load(), applyParallelism)
	}
}
