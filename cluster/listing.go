package cluster

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// Listing hands out the objects of an informer's first list a page at a
// time, as the pages come, before the list is complete. client-go's
// reflector gives its store nothing of a list until its last page: a
// reader that may act on each object alone (an object listed exists; only
// what is absent needs the whole list) starts that much sooner.
//
// The objects are those of the informer's first list, up to its last
// page. The listing ends there (Whole), or broken: when a page of it
// fails, when a later list starts over, or with End. A reader then reads
// the rest from the informer's store, which a whole listing fills at
// once; after a broken one it fills when the informer's retries list.
type Listing struct {
	mu      sync.Mutex
	objects []*Object
	ended   bool
	whole   bool
	// begun: the informer's first list has begun.
	begun bool
	// more is closed, and replaced, when objects grow or the listing ends.
	more chan struct{}
	// changed are objects known to have changed since a revision
	// (CatchUp), which a reader takes before the list's: a trigger created
	// while Sprout was stopped is found without waiting for the list to
	// reach it. done is closed when the listing ends.
	changed []*Object
	done    chan struct{}
}

// NewListing returns a listing that has no objects yet.
func NewListing() *Listing { return &Listing{more: make(chan struct{}), done: make(chan struct{})} }

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
	return l.at(ctx, i, wait, -1)
}

// AtOrChanged is At waiting, that returns NotYet as soon as more than
// seen objects known changed have come (Changed).
func (l *Listing) AtOrChanged(ctx context.Context, i, seen int) (*Object, Taken, error) {
	return l.at(ctx, i, true, seen)
}

func (l *Listing) at(ctx context.Context, i int, wait bool, seen int) (*Object, Taken, error) {
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
		case seen >= 0 && len(l.changed) > seen:
			l.mu.Unlock()
			return nil, NotYet, nil
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
func (l *Listing) End() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended {
		l.ended, l.objects, l.changed = true, nil, nil
		close(l.more)
		close(l.done)
	}
}

// Changed returns the object i of those known changed since the catch-up's
// revision (CatchUp), if it has come and the listing has not ended.
func (l *Listing) Changed(i int) (*Object, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || i >= len(l.changed) {
		return nil, false
	}
	return l.changed[i], true
}

// Moved is closed when the listing next brings an object, a page's or one
// known changed, or ends.
func (l *Listing) Moved() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.more
}

// change adds an object known changed, and wakes the readers waiting.
func (l *Listing) change(o *Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	l.changed = append(l.changed, o)
	close(l.more)
	l.more = make(chan struct{})
}

// Whole reports whether the listing ended at the end of its list, rather
// than broken.
func (l *Listing) Whole() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.whole
}

// takes reports whether the page a list asks for next is l's: a page of
// the first list. A list that starts over (the first page of another, or
// the pager's whole list when a later page expired) ends l, broken: its
// objects may differ from the first's.
func (l *Listing) takes(continued bool) bool {
	l.mu.Lock()
	first := !continued && !l.begun && !l.ended
	mine := first || continued && l.begun && !l.ended
	l.begun = true
	l.mu.Unlock()
	if !mine {
		l.End()
	}
	return mine
}

// add adds the objects of a page of the first list; last ends l whole.
func (l *Listing) add(objs []runtime.Object, last bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	for _, obj := range objs {
		if o, ok := obj.(*Object); ok {
			l.objects = append(l.objects, o)
		}
	}
	close(l.more)
	if last {
		l.ended, l.whole, l.objects, l.changed = true, true, nil, nil
		close(l.done)
		return
	}
	l.more = make(chan struct{})
}
