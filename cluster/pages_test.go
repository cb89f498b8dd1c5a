package cluster

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// TestTheNextPageIsAskedAhead: the next page of a first list is asked for
// as soon as a page has come, before the pager asks for it, and is then
// taken rather than asked again; every page is asked for once.
func TestTheNextPageIsAskedAhead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns = "pages-ahead"
	configMapsIn(ctx, t, ns, 5, nil)
	// Two objects a page; each continued page's request is told.
	var mu sync.Mutex
	asked := map[string]int{}
	continued := make(chan string, 10)
	paged := rest.CopyConfig(cfg)
	paged.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			q.Set("limit", "2")
			req.URL.RawQuery = q.Encode()
			mu.Lock()
			asked[q.Get("continue")]++
			mu.Unlock()
			if c := q.Get("continue"); c != "" {
				continued <- c
			}
			return rt.RoundTrip(req)
		})
	})
	raw, err := NewRawClient(paged)
	if err != nil {
		t.Fatal(err)
	}
	l := NewListing()
	r := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns, Listing: l}
	a := new(pageAhead)
	o := metav1.ListOptions{Limit: 500, ResourceVersion: "0"}
	var names []string
	for page := 1; ; page++ {
		obj, err := a.listPage(ctx, raw, r, o, Triggers)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		list := obj.(*metainternalversion.List)
		for _, item := range list.Items {
			names = append(names, item.(*Object).GetName())
		}
		if list.Continue == "" {
			break
		}
		// Before the pager asks for the next page, it has been asked for.
		select {
		case c := <-continued:
			if c != list.Continue {
				t.Fatalf("after page %d, asked for the page after %q, want %q", page, c, list.Continue)
			}
		case <-ctx.Done():
			t.Fatalf("after page %d, the next page was not asked for ahead", page)
		}
		o.Continue, o.ResourceVersion = list.Continue, ""
	}
	if want := []string{"cm-0", "cm-1", "cm-2", "cm-3", "cm-4"}; !slices.Equal(names, want) {
		t.Errorf("listed %v, want %v", names, want)
	}
	if !l.Whole() {
		t.Error("the listing did not end whole")
	}
	mu.Lock()
	defer mu.Unlock()
	for c, times := range asked {
		if times != 1 {
			t.Errorf("the page after %q was asked for %d times, want once", c, times)
		}
	}
	if len(asked) != 3 {
		t.Errorf("%d pages asked for, want 3: %v", len(asked), asked)
	}
}

// TestAPageAskedAheadIsTakenOnlyByItsOwnAsk: a page asked ahead with other
// options than the pager's (a list started over) is let go, not returned.
func TestAPageAskedAheadIsTakenOnlyByItsOwnAsk(t *testing.T) {
	ctx := context.Background()
	raw, err := NewRawClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}}
	a := new(pageAhead)
	a.ask(ctx, raw, r, metav1.ListOptions{Limit: 1, Continue: "a-token"})
	if _, asked, _ := a.take(ctx, metav1.ListOptions{Limit: 1, Continue: "another-token"}); asked {
		t.Error("a page asked ahead with another token was taken")
	}
	if _, asked, _ := a.take(ctx, metav1.ListOptions{Limit: 1, Continue: "a-token"}); asked {
		t.Error("a page let go was taken after")
	}
	a.ask(ctx, raw, r, metav1.ListOptions{Limit: 1})
	body, asked, err := a.take(ctx, metav1.ListOptions{Limit: 1})
	if page, _ := splitPage(body, r); !asked || err != nil || page.Metadata.Continue == "" {
		t.Errorf("the page asked ahead: asked %v, %v, continue %q", asked, err, page.Metadata.Continue)
	}
}
