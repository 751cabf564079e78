package purgatory

import (
	"sync"
	"sync/atomic"
	"time"
)

// Operation is a delayed operation, implemented by the caller (a long-poll fetch, an
// acks=all produce, a join). Implementations embed Delayed, which supplies the unexported
// method, and call Init before handing the operation to a Purgatory.
//
// TryComplete checks the operation's condition and, if it holds, calls ForceComplete and
// returns its result. The purgatory never runs two TryComplete calls of one operation at
// once (it holds the operation's lock around them), so TryComplete needs no lock of its own
// for state it shares only with itself.
//
// OnComplete runs exactly once: from ForceComplete (inside TryComplete, or called directly
// by anyone), or when the operation expires, in which case OnExpiration runs first, on the
// same goroutine. Expiry callbacks run on the purgatory's reaper goroutine (or on the
// goroutine calling AdvanceClock or Close); they must not block and must not call
// AdvanceClock or Close. OnComplete may call TryCompleteElseWatch and CheckAndComplete
// (a completion that unblocks others); TryComplete may not.
type Operation interface {
	TryComplete() bool
	OnComplete()
	OnExpiration()
	delayed() *Delayed
}

// Delayed is the state every Operation embeds: its timeout, the completed flag, the lock
// that serialises its TryComplete calls and its link in the timing wheel.
//
// The zero value is not ready: call Init once, before the operation is given to
// TryCompleteElseWatch. An operation is single-use; do not Init it again while a
// purgatory may still hold it.
type Delayed struct {
	self      Operation
	timeoutMs int64
	completed atomic.Bool
	mu        sync.Mutex // held around TryComplete by the purgatory
	entry     timerEntry
}

// maxTimeoutMs caps a timeout (about 35 years) so deadlines never overflow.
const maxTimeoutMs = int64(1) << 40

// Init binds d to the operation that embeds it and sets its timeout. A timeout of zero
// or less means the operation expires as soon as the reaper runs, unless it completes at
// once; timeouts are rounded down to whole milliseconds and capped at about 35 years.
//
//	type fetch struct {
//		purgatory.Delayed
//		...
//	}
//	f := &fetch{...}
//	f.Init(f, maxWait)
func (d *Delayed) Init(self Operation, timeout time.Duration) {
	ms := int64(timeout / time.Millisecond)
	if ms < 0 {
		ms = 0
	}
	if ms > maxTimeoutMs {
		ms = maxTimeoutMs
	}
	d.self = self
	d.timeoutMs = ms
	d.completed.Store(false)
	d.entry.op = d
}

// Timeout returns the timeout given to Init, in whole milliseconds.
func (d *Delayed) Timeout() time.Duration { return time.Duration(d.timeoutMs) * time.Millisecond }

// ForceComplete completes the operation if nobody has yet: it cancels the timeout and
// runs OnComplete on the calling goroutine. It reports whether this call completed it.
func (d *Delayed) ForceComplete() bool {
	if !d.completed.CompareAndSwap(false, true) {
		return false
	}
	d.entry.remove()
	d.self.OnComplete()
	return true
}

// Quiesce waits until no TryComplete of the completed operation is running. None starts
// after completion, so once Quiesce returns the operation may drop what its TryComplete
// reads: a completed operation stays in the watch lists of its other keys until they are
// swept (up to Options.PurgeInterval completed operations per purgatory), and everything
// it still references stays allocated with it. Call it only after the operation
// completed, and never from its TryComplete or OnComplete (the purgatory may hold the
// operation's lock there).
func (d *Delayed) Quiesce() {
	d.mu.Lock()
	d.mu.Unlock() // an empty critical section: waiting for the lock is the point
}

// IsCompleted reports whether the operation has completed (or expired). It turns true
// as completion begins, before OnExpiration and OnComplete have run.
func (d *Delayed) IsCompleted() bool { return d.completed.Load() }

func (d *Delayed) delayed() *Delayed { return d }

// expire completes the operation by timeout: OnExpiration then OnComplete, if nobody
// completed it first. It reports whether it did.
func (d *Delayed) expire() bool {
	if !d.completed.CompareAndSwap(false, true) {
		return false
	}
	d.entry.remove()
	d.self.OnExpiration()
	d.self.OnComplete()
	return true
}

// safeTryComplete runs TryComplete under the operation's lock, unless it has completed.
// The check before the lock matters: an operation's OnComplete runs under that lock and
// may call CheckAndComplete on a key that still lists the operation; it is completed by
// then, so it is skipped instead of locked again (Kafka's lock is reentrant instead).
func (d *Delayed) safeTryComplete() bool {
	if d.completed.Load() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.completed.Load() {
		return false
	}
	return d.self.TryComplete()
}
