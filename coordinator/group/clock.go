package group

import "time"

// Clock is the coordinator's source of time and timers. Tests inject a fake whose
// timers fire only when the test advances it; production uses SystemClock.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine (or the caller of the fake's advance)
	// once d has passed. Stop prevents a call that has not started.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	Stop() bool
}

// SystemClock is the wall clock with time.AfterFunc timers.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
