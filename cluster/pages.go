package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	sigsjson "sigs.k8s.io/json"

	"github.com/sprout-gitops/sprout/internal/wire"
)

// The first page of an informer's first list is small (firstPage), so
// that a first sync has triggers to evaluate soon: the API server answers
// a small page sooner, and Sprout decodes it sooner. The pages after it
// are large (laterPage): the list waits for each page in turn, a round
// trip each, so fewer, larger pages end it sooner (decisions.md has the
// measurements).
const (
	firstPage = 64
	laterPage = 2000
)

// pageAhead is the next page of an informer's first list, asked for as
// soon as the page before it has come, before that page is decoded. The
// pager asks for each page with the continue token of the one before, so
// a list of n pages waited n times for the API server to encode a page
// and n times for Sprout to decode one, one after the other; asked ahead,
// the API server encodes the next page while Sprout decodes this one. A
// page is split into its items (splitPage), which gives the token, before
// they are decoded.
type pageAhead struct {
	mu   sync.Mutex
	next *pageAsked
}

// pageAsked is a page's request, asked ahead with the options query.
type pageAsked struct {
	query  string
	done   chan struct{}
	body   []byte
	err    error
	cancel context.CancelFunc
}

// listPage reads one page of a list of r in JSON, as the reflector's pager
// asks for it, each item made in form by the one-pass decoder (FromJSON),
// and hands the page to r's Listing when it is one of the first list's.
// The first list asks for revision "0", which the API server serves whole
// from its cache, whatever the limit: it asks for the newest instead,
// which the API server serves in pages.
func (a *pageAhead) listPage(ctx context.Context, raw rest.Interface, r Resource, o metav1.ListOptions, form Form) (runtime.Object, error) {
	if o.ResourceVersion == "0" && o.Continue == "" {
		o.ResourceVersion = ""
	}
	if o.Continue != "" && o.Limit > 0 {
		o.Limit = max(o.Limit, laterPage)
	}
	mine := r.Listing.takes(o.Continue != "")
	switch {
	case o.Continue != "" || o.Limit == 0:
	case mine:
		o.Limit = min(o.Limit, firstPage)
	case o.ResourceVersion != "":
		// A list again at the revision the informer reached, after its
		// watch failed: whole, from the API server's cache. client-go's
		// reflector asks for it in pages once the first list came in
		// more than one, and a page at a revision is an exact read,
		// which the API server serves from etcd, not its cache; the
		// reflector itself lists whole there when the first came whole.
		o.Limit = 0
	}
	body, asked, err := a.take(ctx, o)
	if !asked {
		body, err = getPage(ctx, raw, r, o)
	}
	var split wire.JSONList
	if err == nil {
		split, err = splitPage(body, r)
	}
	if cont := split.Metadata.Continue; err == nil && mine && cont != "" {
		// What the pager asks for next (see tools/pager).
		next := o
		next.Continue, next.ResourceVersion, next.ResourceVersionMatch = cont, "", ""
		next.Limit = max(o.Limit, laterPage)
		a.ask(ctx, raw, r, next)
	}
	var page *metainternalversion.List
	if err == nil {
		page, err = decodeItems(split, r, form)
	}
	switch {
	case !mine:
	case err != nil:
		a.drop()
		r.Listing.End()
	default:
		r.Listing.add(page.Items, page.Continue == "")
	}
	if err != nil {
		return nil, err
	}
	return page, nil
}

// ask starts the request of the page o asks for, to be taken by the
// listPage that asks for it.
func (a *pageAhead) ask(ctx context.Context, raw rest.Interface, r Resource, o metav1.ListOptions) {
	ctx, cancel := context.WithCancel(ctx)
	p := &pageAsked{query: queryOf(o), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(p.done)
		p.body, p.err = getPage(ctx, raw, r, o)
	}()
	a.swap(p)
}

// take returns the page asked ahead when it is the one o asks for (asked),
// waiting for it. A page asked for otherwise is let go.
func (a *pageAhead) take(ctx context.Context, o metav1.ListOptions) (body []byte, asked bool, err error) {
	a.mu.Lock()
	p := a.next
	a.next = nil
	a.mu.Unlock()
	if p == nil {
		return nil, false, nil
	}
	defer p.cancel()
	if p.query != queryOf(o) {
		return nil, false, nil
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
	if errors.Is(p.err, context.Canceled) && ctx.Err() == nil {
		return nil, false, nil // asked within a list that ended; ask again
	}
	return p.body, true, p.err
}

// drop lets go of a page asked ahead.
func (a *pageAhead) drop() { a.swap(nil) }

// swap makes p the page asked ahead, and lets go of the one before.
func (a *pageAhead) swap(p *pageAsked) {
	a.mu.Lock()
	prev := a.next
	a.next = p
	a.mu.Unlock()
	if prev != nil {
		prev.cancel()
	}
}

// queryOf is o as a request's query.
func queryOf(o metav1.ListOptions) string {
	q, err := metav1.ParameterCodec.EncodeParameters(&o, metav1.SchemeGroupVersion)
	if err != nil {
		return "" // never taken: a query is never empty
	}
	return q.Encode()
}

// getPage reads one page of a list of r in JSON.
func getPage(ctx context.Context, raw rest.Interface, r Resource, o metav1.ListOptions) ([]byte, error) {
	return raw.Get().AbsPath(apiPrefix(r.GVR)).Namespace(r.Namespace).Resource(r.GVR.Resource).
		SpecificallyVersionedParams(&o, metav1.ParameterCodec, metav1.SchemeGroupVersion).
		SetHeader("Accept", acceptJSON).
		DoRaw(ctx)
}

// splitPage reads a page of a list of r in JSON into its envelope and its
// items, still JSON: split where the items come last, as the API server
// writes them, which is cheap and gives the continue token before the
// items are decoded.
func splitPage(body []byte, r Resource) (wire.JSONList, error) {
	page, ok := wire.SplitJSONList(body)
	if !ok {
		// Another shape than the API server's: read as any JSON.
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &page); err != nil {
			return page, fmt.Errorf("list of %s: %w", r.GVR, err)
		}
	}
	return page, nil
}

// decodeItems decodes the items of a page of a list of r, each made in
// form. Items of a built-in type come without apiVersion and kind: the
// list's give them.
func decodeItems(page wire.JSONList, r Resource, form Form) (*metainternalversion.List, error) {
	kind, err := listedKindOf(schema.FromAPIVersionAndKind(page.APIVersion, strings.TrimSuffix(page.Kind, "List")))
	if err != nil {
		return nil, fmt.Errorf("list of %s: %w", r.GVR, err)
	}
	list := &metainternalversion.List{ListMeta: page.Metadata, Items: make([]runtime.Object, len(page.Items))}
	for i, item := range page.Items {
		obj, err := form.fromJSON(item, kind)
		if err != nil {
			return nil, fmt.Errorf("list of %s: items[%d]: %w", r.GVR, i, err)
		}
		list.Items[i] = obj
	}
	return list, nil
}
