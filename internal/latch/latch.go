// Package latch runs a request's answer once the parts it waits for are all in:
// a sync.WaitGroup whose Wait is a callback, for handlers that answer on another
// goroutine and must not block.
//
// The creator holds one count from New until its own Done, so that parts answered
// while it is still adding others cannot run the completion early:
//
//	l := latch.New(func() { r.Respond(resp) })
//	for _, p := range parts {
//		l.Add()
//		start(p, func(err error) { l.Done(func() { p.code = code(err) }) })
//	}
//	l.Done(nil)
package latch

import "sync"

// Latch counts the parts a completion waits for.
type Latch struct {
	mu   sync.Mutex
	left int
	done func()
}

// New returns a latch held once by its caller; done runs on the goroutine of
// the Done that brings the count to zero, once.
func New(done func()) *Latch { return &Latch{left: 1, done: done} }

// Add counts one more part to wait for.
func (l *Latch) Add() {
	l.mu.Lock()
	l.left++
	l.mu.Unlock()
}

// Done counts a part in. record, when not nil, runs under the latch's lock
// first, so that parts answering on different goroutines may write to the one
// answer they share.
func (l *Latch) Done(record func()) {
	l.mu.Lock()
	if record != nil {
		record()
	}
	l.left--
	last := l.left == 0
	l.mu.Unlock()
	if last {
		l.done()
	}
}
