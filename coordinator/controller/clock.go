package controller

import (
	"container/heap"
	"sync"
	"time"
)

// Clock is the source of time and timers of the controller, the broker lifecycle and
// the metadata follower. Production uses SystemClock; tests and simulations a
// ManualClock whose timers fire only when it is advanced.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once d has passed, on its own goroutine (SystemClock) or on
	// the goroutine advancing the clock (ManualClock). Stop prevents a call that has
	// not started.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it did.
	Stop() bool
}

// SystemClock is the wall clock with time.AfterFunc timers.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// ManualClock is a deterministic clock: time moves only by Advance, AdvanceTo or
// Step, which run the due timers on the caller's goroutine in the order of their due
// time, then of their creation. Safe for concurrent use; a timer's function may
// create and stop timers.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers timerHeap
}

// NewManualClock returns a clock standing at start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f at Now()+d (d <= 0: at the next Advance, even by zero).
func (c *ManualClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &manualTimer{c: c, at: c.now.Add(max(d, 0)), seq: c.seq, f: f, index: -1}
	heap.Push(&c.timers, t)
	return t
}

// Advance moves the clock forward by d, running every timer due by then.
func (c *ManualClock) Advance(d time.Duration) {
	c.AdvanceTo(c.Now().Add(d))
}

// AdvanceTo moves the clock to t (never backwards), running every timer due by then
// in order; the clock reads each timer's due time while its function runs.
func (c *ManualClock) AdvanceTo(t time.Time) {
	for c.fireNext(t) {
	}
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
}

// Step runs the earliest pending timer, moving the clock to its due time, and
// reports whether there was one.
func (c *ManualClock) Step() bool {
	c.mu.Lock()
	if len(c.timers) == 0 {
		c.mu.Unlock()
		return false
	}
	at := c.timers[0].at
	c.mu.Unlock()
	return c.fireNext(at)
}

// Next returns the due time of the earliest pending timer.
func (c *ManualClock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].at, true
}

// Pending returns the number of pending timers.
func (c *ManualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// fireNext runs the earliest timer due at or before limit.
func (c *ManualClock) fireNext(limit time.Time) bool {
	c.mu.Lock()
	if len(c.timers) == 0 || c.timers[0].at.After(limit) {
		c.mu.Unlock()
		return false
	}
	t := heap.Pop(&c.timers).(*manualTimer)
	if t.at.After(c.now) {
		c.now = t.at
	}
	c.mu.Unlock()
	t.f()
	return true
}

type manualTimer struct {
	c     *ManualClock
	at    time.Time
	seq   uint64
	f     func()
	index int // in the heap; -1 when fired or stopped
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.c.timers, t.index)
	return true
}

type timerHeap []*manualTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*manualTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
