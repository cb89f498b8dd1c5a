package cluster

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// events is a watch.Decoder that returns its events, then io.EOF.
type events struct {
	events []watch.Event
	closed bool
}

func (e *events) Decode() (watch.EventType, runtime.Object, error) {
	if len(e.events) == 0 {
		return "", nil, io.EOF
	}
	ev := e.events[0]
	e.events = e.events[1:]
	return ev.Type, ev.Object, nil
}

func (e *events) Close() { e.closed = true }

func bookmark(end bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if end {
		u.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	return u
}

func decodeAll(t *testing.T, d watch.Decoder) {
	t.Helper()
	for {
		if _, _, err := d.Decode(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestListingHandsOutTheInitialEvents: a listing holds the objects of the
// first watch's ADDED events up to the bookmark that ends the initial
// events, and ends there; what comes after is not in it.
func TestListingHandsOutTheInitialEvents(t *testing.T) {
	ctx := context.Background()
	a, b, c := &Object{}, &Object{}, &Object{}
	l := NewListing()
	if _, got, err := l.At(ctx, 0, false); got != NotYet || err != nil {
		t.Fatalf("empty listing: %v, %v; want NotYet", got, err)
	}
	d := l.decoder(&events{events: []watch.Event{
		{Type: watch.Added, Object: a},
		{Type: watch.Bookmark, Object: bookmark(false)},
		{Type: watch.Added, Object: b},
	}})
	for range 3 {
		if _, _, err := d.Decode(); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []*Object{a, b} {
		if o, got, err := l.At(ctx, i, true); o != want || got != Got || err != nil {
			t.Fatalf("At(%d) = %p, %v, %v; want %p", i, o, got, err, want)
		}
	}
	if _, got, _ := l.At(ctx, 2, false); got != NotYet {
		t.Fatalf("At(2) before the end: %v, want NotYet", got)
	}
	// The initial events end; a later ADDED is an event, not a listed object.
	d2 := &events{events: []watch.Event{{Type: watch.Bookmark, Object: bookmark(true)}, {Type: watch.Added, Object: c}}}
	d = l.decoder(d2)
	if d != d2 {
		t.Fatal("a second watch was read into the listing")
	}
	if _, got, _ := l.At(ctx, 0, true); got != Ended {
		t.Fatalf("after a second watch began: %v, want Ended", got)
	}
}

// TestListingEndsWithItsBookmarkOrItsWatch: the bookmark that ends the
// initial events ends the listing, and so does its watch closing first; a
// reader waiting for an object wakes to the end, or to its context.
func TestListingEndsWithItsBookmarkOrItsWatch(t *testing.T) {
	ctx := context.Background()
	l := NewListing()
	decodeAll(t, l.decoder(&events{events: []watch.Event{
		{Type: watch.Added, Object: &Object{}},
		{Type: watch.Bookmark, Object: bookmark(true)},
		{Type: watch.Added, Object: &Object{}},
	}}))
	if _, got, _ := l.At(ctx, 0, true); got != Ended {
		t.Fatalf("after the bookmark: %v, want Ended", got)
	}
	if !l.Whole() {
		t.Error("a listing ended by its bookmark is not whole")
	}

	l = NewListing()
	src := &events{events: []watch.Event{{Type: watch.Added, Object: &Object{}}}}
	d := l.decoder(src)
	if _, _, err := d.Decode(); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := l.At(ctx, 1, false); got != NotYet {
		t.Fatalf("before the watch closed: %v, want NotYet", got)
	}
	d.Close()
	if !src.closed {
		t.Error("the watch was not closed")
	}
	if _, got, _ := l.At(ctx, 1, true); got != Ended {
		t.Fatalf("after the watch closed: %v, want Ended", got)
	}
	if l.Whole() {
		t.Error("a listing whose watch closed before its bookmark is whole")
	}

	l = NewListing()
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	if _, got, err := l.At(stopped, 0, true); got != NotYet || !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting with a context ended: %v, %v; want NotYet and its error", got, err)
	}
	done := make(chan Taken)
	go func() {
		_, got, _ := l.At(ctx, 0, true)
		done <- got
	}()
	l.End()
	if got := <-done; got != Ended {
		t.Fatalf("a reader waiting when the listing ended: %v, want Ended", got)
	}
}

// TestListingEndsWhenItsWatchCannotOpen: a watch-list the API server
// refuses (here RBAC: the user may not list ConfigMaps) ends the listing,
// broken, so that its reader goes on to wait as for any informer not
// synced, rather than for a stream that is not coming.
func TestListingEndsWhenItsWatchCannotOpen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nobody := rest.CopyConfig(cfg)
	nobody.Impersonate = rest.ImpersonationConfig{UserName: "listing-nobody"}
	raw, err := NewRawClient(nobody)
	if err != nil {
		t.Fatal(err)
	}
	l := NewListing()
	inf := NewInformer(dynamic.NewForConfigOrDie(nobody), raw,
		Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Listing: l}, nil, Triggers)
	go inf.RunWithContext(ctx)
	if _, got, err := l.At(ctx, 0, true); got != Ended || err != nil {
		t.Fatalf("a listing whose watch was refused: %v, %v; want Ended", got, err)
	}
	if l.Whole() {
		t.Error("a listing whose watch was refused is whole")
	}
	if inf.HasSynced() {
		t.Error("the informer listed what it may not list")
	}
}
