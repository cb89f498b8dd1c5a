package inventory

// workers run the requests of Apply calls on at most n goroutines, each
// kept for the next request until stop. A goroutine started for each
// request would grow its stack to a request's depth (JSON, HTTP/2) every
// time, which showed in the CPU profile of a cold generation.
type workers struct {
	work chan func()
	// started holds a token for each goroutine started: at most n.
	started chan struct{}
}

func newWorkers(n int) *workers {
	return &workers{work: make(chan func()), started: make(chan struct{}, n)}
}

// do runs fn on an idle goroutine, on a new one while fewer than n were
// started, or on the first to be idle.
func (w *workers) do(fn func()) {
	select {
	case w.work <- fn:
	case w.started <- struct{}{}:
		go w.loop(fn)
	}
}

func (w *workers) loop(fn func()) {
	for ok := true; ok; fn, ok = <-w.work {
		fn()
	}
}

// stop ends the goroutines once idle; do may not be called after.
func (w *workers) stop() { close(w.work) }
