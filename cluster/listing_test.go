package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// TestListingHandsOutItsFirstListsPages: a listing holds the objects of
// the pages of the informer's first list as they come, and ends whole with
// its last page; a list that starts over is not read into it.
func TestListingHandsOutItsFirstListsPages(t *testing.T) {
	ctx := context.Background()
	a, b, c := &Object{}, &Object{}, &Object{}
	l := NewListing()
	if _, got, err := l.At(ctx, 0, false); got != NotYet || err != nil {
		t.Fatalf("empty listing: %v, %v; want NotYet", got, err)
	}
	if !l.takes(false) {
		t.Fatal("the first list's first page is not the listing's")
	}
	l.add([]runtime.Object{a, b}, false)
	for i, want := range []*Object{a, b} {
		if o, got, err := l.At(ctx, i, true); o != want || got != Got || err != nil {
			t.Fatalf("At(%d) = %p, %v, %v; want %p", i, o, got, err, want)
		}
	}
	if _, got, _ := l.At(ctx, 2, false); got != NotYet {
		t.Fatalf("At(2) before the next page: %v, want NotYet", got)
	}
	// A reader waiting for the next object wakes to the next page.
	next := make(chan *Object)
	go func() {
		o, _, _ := l.At(ctx, 2, true)
		next <- o
	}()
	if !l.takes(true) {
		t.Fatal("the first list's next page is not the listing's")
	}
	l.add([]runtime.Object{c}, false)
	if o := <-next; o != c {
		t.Fatalf("the reader waiting for the next page got %p, want %p", o, c)
	}
	// The last page ends the listing whole: its objects are read from the
	// informer's cache, which the whole list fills at once.
	l.takes(true)
	l.add([]runtime.Object{&Object{}}, true)
	if _, got, _ := l.At(ctx, 3, true); got != Ended || !l.Whole() {
		t.Fatalf("after the last page: %v, whole %v; want Ended, whole", got, l.Whole())
	}
	if l.takes(false) {
		t.Error("a later list was read into the listing")
	}
	if !l.Whole() {
		t.Error("a later list broke a listing that had ended whole")
	}
}

// TestListingChangedWakesItsReader: an object known changed (CatchUp)
// wakes a reader waiting for the list's next object, which AtOrChanged
// returns NotYet for, not for one it has seen; the listing's end drops
// what it had.
func TestListingChangedWakesItsReader(t *testing.T) {
	ctx := context.Background()
	l := NewListing()
	l.takes(false)
	woke := make(chan Taken)
	go func() {
		_, got, _ := l.AtOrChanged(ctx, 0, 0)
		woke <- got
	}()
	changed := &Object{}
	l.change(changed)
	if got := <-woke; got != NotYet {
		t.Fatalf("the reader woke with %v, want NotYet", got)
	}
	if o, ok := l.Changed(0); o != changed || !ok {
		t.Fatalf("Changed(0) = %p, %v; want %p", o, ok, changed)
	}
	if _, ok := l.Changed(1); ok {
		t.Fatal("Changed(1) with one object known changed")
	}
	// Having seen it, the reader waits for the list.
	listed := &Object{}
	go func() {
		o, _, _ := l.AtOrChanged(ctx, 0, 1)
		if o != listed {
			t.Errorf("the reader that had seen the changed object got %p, want the listed %p", o, listed)
		}
		close(woke)
	}()
	l.takes(true)
	l.add([]runtime.Object{listed}, false)
	<-woke
	l.takes(true)
	l.add(nil, true)
	if _, ok := l.Changed(0); ok {
		t.Error("the ended listing still hands out what changed")
	}
	select {
	case <-l.done:
	default:
		t.Error("the listing ended whole, and its catch-up was not told")
	}
}

// TestListingEndsBrokenWhenItsListStartsOver: a list that starts over
// before its last page (the pager's whole list after an expired page, the
// reflector's retry after a failed one) ends the listing broken, and so
// does End; a reader waiting for an object wakes to the end, or to its
// context.
func TestListingEndsBrokenWhenItsListStartsOver(t *testing.T) {
	ctx := context.Background()
	l := NewListing()
	l.takes(false)
	l.add([]runtime.Object{&Object{}}, false)
	if l.takes(false) {
		t.Fatal("a list started over was read into the listing")
	}
	if _, got, _ := l.At(ctx, 0, true); got != Ended || l.Whole() {
		t.Fatalf("after the list started over: %v, whole %v; want Ended, broken", got, l.Whole())
	}
	if l.takes(true) {
		t.Error("a page of a list started over was read into the listing")
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
	if got := <-done; got != Ended || l.Whole() {
		t.Fatalf("a reader waiting when the listing ended: %v, whole %v; want Ended, broken", got, l.Whole())
	}
}

// TestListingTakesTheListInPages: an informer with a listing lists in
// pages, never a watch-list, and hands each page but the last out before
// the next is asked for; its objects are the ones its cache then holds,
// each with the apiVersion and kind a list's items of a built-in type come
// without.
func TestListingTakesTheListInPages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns = "listing-pages"
	configMapsIn(ctx, t, ns, 5, map[string]string{"paged": "yes"})
	// Two objects a page.
	l := NewListing()
	paged := rest.CopyConfig(cfg)
	var mu sync.Mutex
	var requests []string
	paged.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if q.Get("labelSelector") == "paged=yes" {
				asked := q.Get("limit")
				if q.Get("watch") != "true" {
					q.Set("limit", "2")
					req.URL.RawQuery = q.Encode()
				}
				mu.Lock()
				requests = append(requests, fmt.Sprintf("watch=%s sendInitialEvents=%s continue=%t limit=%s", q.Get("watch"), q.Get("sendInitialEvents"), q.Get("continue") != "", asked))
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	raw, err := NewRawClient(paged)
	if err != nil {
		t.Fatal(err)
	}
	inf := NewInformer(dynamic.NewForConfigOrDie(paged), raw, Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Namespace: ns, LabelSelector: "paged=yes", Listing: l}, nil, Triggers)
	go inf.RunWithContext(ctx)
	var names []string
	for i := 0; ; i++ {
		o, got, err := l.At(ctx, i, true)
		if err != nil {
			t.Fatal(err)
		}
		if got == Ended {
			break
		}
		names = append(names, o.GetName())
		u := o.Decode()
		if u.GetAPIVersion() != "v1" || u.GetKind() != "ConfigMap" || u.GetName() != o.GetName() || u.Object["data"] == nil {
			t.Errorf("listed object %d decodes as %v", i, u.Object)
		}
		if o.GroupVersionKind() != corev1.SchemeGroupVersion.WithKind("ConfigMap") {
			t.Errorf("listed object %d is a %v", i, o.GroupVersionKind())
		}
	}
	if !l.Whole() {
		t.Fatal("the listing ended broken")
	}
	if want := []string{"cm-0", "cm-1", "cm-2", "cm-3"}; !slices.Equal(names, want) {
		t.Fatalf("listed %v, want %v: the pages before the last", names, want)
	}
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	for _, name := range append(names, "cm-4") {
		if _, ok, _ := inf.GetStore().GetByKey(ns + "/" + name); !ok {
			t.Errorf("%s is not in the cache", name)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	lists := requests[:3]
	// The first page is small (firstPage), so that a first sync begins
	// soon; the next are larger (laterPage).
	if want := []string{"watch= sendInitialEvents= continue=false limit=64", "watch= sendInitialEvents= continue=true limit=2000", "watch= sendInitialEvents= continue=true limit=2000"}; !slices.Equal(lists, want) {
		t.Errorf("requests %q, want the list in three pages first", requests)
	}
	for _, r := range requests[3:] {
		if !strings.HasPrefix(r, "watch=true sendInitialEvents= continue=false limit=") {
			t.Errorf("after the list: %q, want a watch without initial events", r)
		}
	}
}

// TestListingEndsWhenItsListIsRefused: a list the API server refuses
// (here RBAC: the user may not list ConfigMaps) ends the listing, broken,
// so that its reader goes on to wait as for any informer not synced,
// rather than for pages that are not coming.
func TestListingEndsWhenItsListIsRefused(t *testing.T) {
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
		t.Fatalf("a listing whose list was refused: %v, %v; want Ended", got, err)
	}
	if l.Whole() {
		t.Error("a listing whose list was refused is whole")
	}
	if inf.HasSynced() {
		t.Error("the informer listed what it may not list")
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// configMapsIn creates the Namespace ns, deleted after the test, and in it
// the ConfigMaps cm-0 to cm-<n-1>, labelled labels, each with data i.
func configMapsIn(ctx context.Context, t *testing.T, ns string, n int, labels map[string]string) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cfg)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	for i := range n {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Labels: labels},
			Data:       map[string]string{"i": fmt.Sprint(i)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
