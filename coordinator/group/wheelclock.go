package group

import (
	"sync/atomic"
	"time"

	"github.com/samsa-broker/samsa/purgatory"
)

// WheelClock is a Clock whose timers are delayed operations in a purgatory: the
// hierarchical timing wheel arms and cancels them in O(1), and one reaper goroutine
// fires them all. Session, rebalance, pending-sync and initial-delay timeouts of
// every group live there. It is the coordinator's default clock.
type WheelClock struct {
	p      *purgatory.Purgatory[struct{}]
	closed atomic.Bool
}

// NewWheelClock starts a wheel with its reaper goroutine; Close stops it.
func NewWheelClock() *WheelClock {
	return &WheelClock{p: purgatory.New[struct{}]("group-timers", purgatory.Options{})}
}

// Now returns time.Now().
func (c *WheelClock) Now() time.Time { return time.Now() }

// AfterFunc arms a timed-only operation that runs f on the reaper goroutine when it
// expires. f must not block for long: it holds up every other timer.
func (c *WheelClock) AfterFunc(d time.Duration, f func()) Timer {
	t := &wheelTimer{c: c, f: f}
	t.Init(t, d)
	c.p.TryCompleteElseWatch(t) // no keys: only its timeout or Stop completes it
	return t
}

// Close stops the reaper. Pending timers are dropped without running.
func (c *WheelClock) Close() {
	c.closed.Store(true)
	c.p.Close()
}

type wheelTimer struct {
	purgatory.Delayed
	c *WheelClock
	f func()
}

func (t *wheelTimer) TryComplete() bool { return false }
func (t *wheelTimer) OnComplete()       {}

func (t *wheelTimer) OnExpiration() {
	if !t.c.closed.Load() {
		t.f()
	}
}

// Stop cancels the timer; it reports whether it was still pending.
func (t *wheelTimer) Stop() bool { return t.ForceComplete() }
