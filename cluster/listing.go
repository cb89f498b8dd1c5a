package cluster

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Listing hands out the objects of an informer's first list as its watch
// stream brings them, before the list is complete. client-go's reflector
// gives its store nothing of a watch-list until the list's last object:
// a reader that may act on each object alone (an object listed exists;
// only what is absent needs the whole list) starts that much sooner.
//
// The objects are those of the first watch that sends initial events, up
// to the bookmark that ends them. The listing ends there (Whole), or
// broken: when that watch fails to open or ends first, when a later watch
// starts over, or with End. A reader then reads the rest from the
// informer's store, which a whole listing fills at once; after a broken
// one it fills when the informer's retries list.
type Listing struct {
	mu      sync.Mutex
	objects []*Object
	ended   bool
	whole   bool
	watched bool
	// more is closed, and replaced, when objects grow or the listing ends.
	more chan struct{}
}

// NewListing returns a listing that has no objects yet.
func NewListing() *Listing { return &Listing{more: make(chan struct{})} }

// Taken is what At says of the object asked for.
type Taken int

const (
	// Got: the object is there.
	Got Taken = iota
	// NotYet: the listing has not brought it yet.
	NotYet
	// Ended: the listing ends before it.
	Ended
)

// At returns the listing's object i. When it has not come yet and wait is
// set, At waits for it, for the listing's end or for ctx.
func (l *Listing) At(ctx context.Context, i int, wait bool) (*Object, Taken, error) {
	for {
		l.mu.Lock()
		switch {
		case l.ended:
			l.mu.Unlock()
			return nil, Ended, nil
		case i < len(l.objects):
			o := l.objects[i]
			l.mu.Unlock()
			return o, Got, nil
		}
		more := l.more
		l.mu.Unlock()
		if !wait {
			return nil, NotYet, nil
		}
		select {
		case <-more:
		case <-ctx.Done():
			return nil, NotYet, ctx.Err()
		}
	}
}

// End ends the listing: its objects are let go, and its readers read the
// store.
func (l *Listing) End() { l.end(false) }

// Whole reports whether the listing ended at the end of its list, rather
// than broken.
func (l *Listing) Whole() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.whole
}

func (l *Listing) end(whole bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended {
		l.ended, l.whole, l.objects = true, whole, nil
		close(l.more)
	}
}

func (l *Listing) add(o *Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	l.objects = append(l.objects, o)
	close(l.more)
	l.more = make(chan struct{})
}

// decoder returns d, reading into the listing when d is the first watch
// that sends initial events; a later one ends the listing: its objects
// may differ from the first's.
func (l *Listing) decoder(d watch.Decoder) watch.Decoder {
	l.mu.Lock()
	first := !l.watched && !l.ended
	l.watched = true
	l.mu.Unlock()
	if !first {
		l.End()
		return d
	}
	return &listingDecoder{Decoder: d, l: l}
}

// listingDecoder adds the initial events of a watch to its listing.
type listingDecoder struct {
	watch.Decoder
	l    *Listing
	done bool
}

func (d *listingDecoder) Decode() (watch.EventType, runtime.Object, error) {
	typ, obj, err := d.Decoder.Decode()
	if d.done {
		return typ, obj, err
	}
	switch {
	case err != nil || typ == watch.Error:
		d.done = true
		d.l.End()
	case typ == watch.Added:
		if o, ok := obj.(*Object); ok {
			d.l.add(o)
		}
	case typ == watch.Bookmark:
		if m, merr := meta.Accessor(obj); merr == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			d.done = true
			d.l.end(true)
		}
	}
	return typ, obj, err
}

// Close ends the listing too: a watch closed before its initial events
// ended leaves it incomplete.
func (d *listingDecoder) Close() {
	d.l.End()
	d.Decoder.Close()
}
