// Package gopool owns goroutines kept between calls. A goroutine started
// for each call begins with a small stack and grows it, copying it at each
// doubling, to the depth of what it runs (JSON, HTTP/2, CEL); a kept one
// has grown it already. The copies showed in the CPU profiles of a cold
// generation and of a steady stream of events.
package gopool

import (
	"sync/atomic"
	"time"
)

// Pool runs functions on at most n goroutines, each kept for the next
// function: until Stop, or, when the pool was made with an idle time,
// until it has waited that long for one.
type Pool struct {
	work chan func()
	// running holds a token for each goroutine running: at most n.
	running chan struct{}
	idle    time.Duration
	started atomic.Int64
}

// New returns a pool of at most n goroutines, kept until Stop.
func New(n int) *Pool {
	return &Pool{work: make(chan func()), running: make(chan struct{}, n)}
}

// NewIdle returns a pool of at most n goroutines, each of which ends once
// it has waited idle for a function: a pool that nothing stops holds no
// goroutine for long after its last call.
func NewIdle(n int, idle time.Duration) *Pool {
	p := New(n)
	p.idle = idle
	return p
}

// Do runs fn on an idle goroutine, on a new one while fewer than n run,
// or else on the first to be idle.
func (p *Pool) Do(fn func()) {
	select {
	case p.work <- fn:
		return
	default: // none idle
	}
	select {
	case p.work <- fn:
	case p.running <- struct{}{}:
		p.started.Add(1)
		go p.loop(fn)
	}
}

// Started counts the goroutines the pool has started.
func (p *Pool) Started() int64 { return p.started.Load() }

func (p *Pool) loop(fn func()) {
	defer func() { <-p.running }()
	if p.idle == 0 {
		for ok := true; ok; fn, ok = <-p.work {
			fn()
		}
		return
	}
	idle := time.NewTimer(p.idle)
	defer idle.Stop()
	for {
		fn()
		idle.Reset(p.idle)
		select {
		case next, ok := <-p.work:
			if !ok {
				return
			}
			fn = next
		case <-idle.C:
			return
		}
	}
}

// Stop ends the goroutines once idle; Do may not be called after.
func (p *Pool) Stop() { close(p.work) }
