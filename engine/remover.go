package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// The files of deleted segments are removed at a bounded pace. On a file
// system that discards freed blocks as it commits its journal (ext4 mounted
// with `discard`, as the root of the machine BENCHMARKS.md measures on), the
// blocks of every file removed since the last commit are discarded before the
// next fdatasync of any file returns: retention's check deletes what grew
// over its interval at once (the segments of steady-1h: about 9 of 64 MiB
// every 5 minutes, released together file.delete.delay.ms later), and the
// durable path stalled for 100-480 ms at each (BENCHMARKS.md, "An hour at a
// fixed rate"). Removed one after another, each log file above removeStep cut
// down by removeStep at a time with removePause between the cuts, a commit
// discards at most about removeStep: 576 MiB removed at once held a 4 KiB
// write + fdatasync loop up to 46-48 ms (p99.9 37-40 ms), cut 4 MiB at a time
// every 5 ms up to 32-34 ms (p99.9 2.3-4.5 ms) on that machine.
const (
	removeStep  = 4 << 20
	removePause = 5 * time.Millisecond
)

// remover removes the files of released deleted segments whose log file is
// larger than step, one segment at a time, off the caller's goroutine.
type remover struct {
	step  int64
	pause time.Duration
	wg    *sync.WaitGroup // the manager's background work, waited for by Close

	mu      sync.Mutex // one removal at a time
	stateMu sync.Mutex
	closing atomic.Bool   // Close: what is left goes without pauses, new ones inline
	closed  chan struct{} // closed with closing: ends a pause under way

	onCut func(size int64) // tests: called after each cut
}

func newRemover(wg *sync.WaitGroup) *remover {
	return &remover{step: removeStep, pause: removePause, wg: wg, closed: make(chan struct{})}
}

// handOff takes over the removal of s's files (s is released and deleted, its
// indexes and transaction index closed, its log file still open) when its
// log file is larger than a step: false leaves it to the caller, to close and
// remove at once.
func (r *remover) handOff(s *segment) bool {
	fi, err := s.log.Stat()
	if err != nil || fi.Size() <= r.step {
		return false
	}
	r.stateMu.Lock()
	if r.closing.Load() {
		r.stateMu.Unlock()
		return false
	}
	r.wg.Add(1)
	r.stateMu.Unlock()
	go func() {
		defer r.wg.Done()
		r.mu.Lock()
		defer r.mu.Unlock()
		for size := fi.Size(); size > r.step; {
			size -= r.step
			if err := s.log.Truncate(size); err != nil {
				break // removed whole below
			}
			if r.onCut != nil {
				r.onCut(size)
			}
			if !r.closing.Load() {
				t := time.NewTimer(r.pause)
				select {
				case <-t.C:
				case <-r.closed:
					t.Stop()
				}
			}
		}
		s.log.Close()
		s.removeFiles()
	}()
	return true
}

// close makes the removals under way finish without pauses and later ones
// happen on their caller's goroutine; the manager then waits for its
// background work.
func (r *remover) close() {
	if r == nil {
		return
	}
	r.stateMu.Lock()
	if !r.closing.Swap(true) {
		close(r.closed)
	}
	r.stateMu.Unlock()
}
