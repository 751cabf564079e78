// Package purgatory owns delayed operations: requests that wait for a condition (a
// long-poll fetch waiting for data, later an acks=all produce waiting for the high
// watermark, a join waiting for members) and complete as soon as it holds, or when their
// timeout expires. It is modelled on Kafka's DelayedOperationPurgatory and its
// hierarchical timing wheel (TimingWheel, TimerTaskList, SystemTimer).
//
// An operation is watched under one or more keys (a partition, a group): whoever changes
// the state behind a key calls CheckAndComplete(key), which retries the operations
// watched there. Timeouts live in a hierarchical timing wheel: insert and cancel are O(1),
// and the reaper goroutine sleeps until the earliest non-empty bucket is due.
//
//	level 0: tick 1 ms, 20 buckets, spans 20 ms
//	┌──┬──┬──┬──┬─────┬──┐   bucket i holds entries expiring in
//	│ 0│ 1│ 2│ 3│ ... │19│   [t0 + i·tick, t0 + (i+1)·tick)
//	└──┴──┴──┴──┴─────┴──┘   (a circular doubly linked list)
//	          │ expirations past level 0's span go up one level
//	level 1: tick 20 ms, 20 buckets, spans 400 ms
//	level 2: tick 400 ms, spans 8 s;  level 3: 8 s, 160 s;  level 4: 160 s, 53 min; ...
//
//	delay queue: a min-heap of the non-empty buckets of every level, by expiration.
//	When a bucket of level k > 0 is due, its entries are re-filed into lower levels
//	(or expire): each entry moves at most once per level.
//
// Levels above 0 are created on first use. An operation fires no earlier than one tick
// before its deadline and, when the reaper is not starved, within about a millisecond
// after it.
//
// Why a wheel and not time.AfterFunc: purgatory_bench_test.go measures both with 10k
// and 100k timeouts pending. Arming and cancelling costs the wheel about a third of the
// CPU of AfterFunc+Stop and no allocation (the link lives in Delayed); arming and
// expiring costs it about a quarter, with one reaper goroutine instead of a goroutine
// per fired timer.
package purgatory

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Purgatory. The zero value means Kafka's defaults.
type Options struct {
	// Tick is the width of a level-0 bucket, rounded down to whole milliseconds
	// (minimum and default 1 ms, maximum 1 h).
	Tick time.Duration
	// WheelSize is the number of buckets per level (default 20; 2..65536).
	WheelSize int
	// Clock returns the current time in milliseconds; it must never go backwards nor be
	// negative. Nil means a monotonic clock and a reaper goroutine that advances the wheel.
	// With a non-nil Clock there is no reaper: the caller drives expiry with AdvanceClock
	// (deterministic tests, simulations).
	Clock func() int64
	// PurgeInterval is how many completed operations may linger in watcher lists before
	// they are swept (default 1000, Kafka's fetch purgatory default).
	PurgeInterval int
}

const shardCount = 64

// Purgatory holds delayed operations keyed by K. All methods are safe for concurrent use.
//
// Lock order: an operation's lock → a watcher shard's lock, and an operation's lock → a
// timer bucket's lock (ForceComplete inside TryComplete cancels the timeout). No shard
// or timer lock is held while TryComplete or a callback runs, except that expiry
// callbacks run under the timer's advance mutex (so they must not call AdvanceClock).
type Purgatory[K comparable] struct {
	name          string
	clock         func() int64
	purgeInterval int64
	seed          maphash.Seed
	shards        [shardCount]shard[K]
	timer         *timer

	// estimated counts operations ever watched since the last purge; estimated minus
	// the timer's pending count approximates completed operations still in lists.
	estimated atomic.Int64
	purging   atomic.Bool
	closed    atomic.Bool

	reaperLoops atomic.Int64 // times the reaper advanced the clock (tests check it sleeps)

	expired []*Delayed // scratch for AdvanceClock; guarded by timer.advMu

	// reaper (nil channels when the caller drives the clock)
	wake chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

type shard[K comparable] struct {
	mu   sync.Mutex
	m    map[K]*watchList
	free []*watchList // emptied lists kept for reuse, so a key that empties and refills allocates nothing
	_    [16]byte     // keep shards on separate cache lines
}

const maxFreeLists = 16

// getLocked returns key's list, creating it if needed.
func (s *shard[K]) getLocked(key K) *watchList {
	if wl := s.m[key]; wl != nil {
		return wl
	}
	var wl *watchList
	if n := len(s.free); n > 0 {
		wl = s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
	} else {
		wl = &watchList{}
	}
	s.m[key] = wl
	return wl
}

// dropLocked deletes key's (empty) list and keeps it for reuse.
func (s *shard[K]) dropLocked(key K, wl *watchList) {
	delete(s.m, key)
	if len(s.free) < maxFreeLists && cap(wl.ops) <= 64 {
		s.free = append(s.free, wl)
	}
}

type watchList struct {
	ops []*Delayed
}

var scratchPool = sync.Pool{New: func() any { s := make([]*Delayed, 0, 64); return &s }}

// New returns a purgatory. name labels it (for metrics and logs). Unless opts.Clock is
// set, it starts a reaper goroutine; call Close to stop it.
func New[K comparable](name string, opts Options) *Purgatory[K] {
	tick := int64(opts.Tick / time.Millisecond)
	if tick < 1 {
		tick = 1
	}
	if tick > int64(time.Hour/time.Millisecond) {
		tick = int64(time.Hour / time.Millisecond)
	}
	size := int64(opts.WheelSize)
	if size <= 0 {
		size = 20
	}
	if size < 2 {
		size = 2
	}
	if size > 1<<16 {
		size = 1 << 16
	}
	purge := int64(opts.PurgeInterval)
	if purge <= 0 {
		purge = 1000
	}
	p := &Purgatory[K]{
		name:          name,
		clock:         opts.Clock,
		purgeInterval: purge,
		seed:          maphash.MakeSeed(),
	}
	for i := range p.shards {
		p.shards[i].m = make(map[K]*watchList)
	}
	reaper := p.clock == nil
	if reaper {
		start := time.Now()
		p.clock = func() int64 { return int64(time.Since(start) / time.Millisecond) }
		p.wake = make(chan struct{}, 1)
		p.done = make(chan struct{})
	}
	p.timer = newTimer(tick, size, p.clock(), p.kick)
	if reaper {
		p.wg.Add(1)
		go p.reap()
	}
	return p
}

// Name returns the name given to New.
func (p *Purgatory[K]) Name() string { return p.name }

// kick wakes the reaper (a no-op when there is none, or it is already awake).
func (p *Purgatory[K]) kick() {
	if p.wake == nil {
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *Purgatory[K]) shardOf(key K) *shard[K] {
	return &p.shards[maphash.Comparable(p.seed, key)%shardCount]
}

// TryCompleteElseWatch tries to complete op at once; if it cannot, it watches op under
// every key and arms its timeout. It reports true if op completed during this call (it
// is then not armed). The op must have been initialised with Init. With no keys, op is
// only timed: nothing but ForceComplete or its timeout will complete it.
//
// After Close, an op that does not complete at once is expired on the calling goroutine.
func (p *Purgatory[K]) TryCompleteElseWatch(op Operation, keys ...K) bool {
	d := op.delayed()
	if d.self == nil {
		panic("purgatory: operation used before Delayed.Init")
	}
	d.mu.Lock()
	if d.completed.Load() {
		d.mu.Unlock()
		return false
	}
	if op.TryComplete() {
		d.mu.Unlock()
		return true
	}
	if p.closed.Load() {
		d.mu.Unlock()
		d.expire()
		return false
	}
	for _, k := range keys {
		s := p.shardOf(k)
		s.mu.Lock()
		wl := s.getLocked(k)
		wl.ops = append(wl.ops, d)
		s.mu.Unlock()
	}
	if len(keys) > 0 {
		p.estimated.Add(1)
	}
	// The condition may have come true between the first try and the watch, with the
	// CheckAndComplete that announced it running before we were watched.
	if op.TryComplete() {
		d.mu.Unlock()
		return true
	}
	d.mu.Unlock()

	d.entry.expiration = satAdd(p.clock(), d.timeoutMs)
	scheduled, closed := p.timer.add(d)
	switch {
	case closed:
		d.expire()
	case !scheduled:
		p.kick()
	}
	p.maybePurge()
	return false
}

// CheckAndComplete retries the operations watched under key and returns how many it
// completed. Completed operations are dropped from the key's list.
func (p *Purgatory[K]) CheckAndComplete(key K) int {
	s := p.shardOf(key)
	s.mu.Lock()
	wl := s.m[key]
	if wl == nil {
		s.mu.Unlock()
		return 0
	}
	sp := scratchPool.Get().(*[]*Delayed)
	ops := append((*sp)[:0], wl.ops...)
	s.mu.Unlock()

	n := 0
	for _, d := range ops {
		if d.safeTryComplete() {
			n++
		}
	}
	clear(ops)
	*sp = ops[:0]
	scratchPool.Put(sp)

	s.mu.Lock()
	if cur := s.m[key]; cur == wl {
		if wl.compact() == 0 {
			s.dropLocked(key, wl)
		}
	}
	s.mu.Unlock()
	return n
}

// compact drops completed operations and returns how many remain. Caller holds the
// shard lock.
func (wl *watchList) compact() int {
	kept := wl.ops[:0]
	for _, d := range wl.ops {
		if !d.completed.Load() {
			kept = append(kept, d)
		}
	}
	clear(wl.ops[len(kept):])
	wl.ops = kept
	if cap(wl.ops) > 64 && len(wl.ops) < cap(wl.ops)/4 {
		wl.ops = append([]*Delayed(nil), wl.ops...)
	}
	return len(wl.ops)
}

// Watched returns the number of watch entries (an operation watched under two keys counts
// twice), including completed ones not yet purged.
func (p *Purgatory[K]) Watched() int {
	n := 0
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for _, wl := range s.m {
			n += len(wl.ops)
		}
		s.mu.Unlock()
	}
	return n
}

// Delayed returns the number of operations armed in the timing wheel.
func (p *Purgatory[K]) Delayed() int { return int(p.timer.size.Load()) }

// Keys returns the number of keys with a watch list.
func (p *Purgatory[K]) Keys() int {
	n := 0
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// needsPurge is Kafka's rule: sweep when the operations watched since the last sweep
// outnumber those still armed by more than the purge interval.
func (p *Purgatory[K]) needsPurge() bool {
	return p.estimated.Load()-p.timer.size.Load() > p.purgeInterval
}

func (p *Purgatory[K]) maybePurge() {
	if !p.needsPurge() {
		return
	}
	if p.wake != nil && !p.closed.Load() {
		p.kick() // the reaper sweeps, off the request path
		return
	}
	p.purge()
}

// purge sweeps completed operations from every watch list; one sweep runs at a time.
func (p *Purgatory[K]) purge() int {
	if !p.purging.CompareAndSwap(false, true) {
		return 0
	}
	defer p.purging.Store(false)
	p.estimated.Store(p.timer.size.Load())
	removed := 0
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for k, wl := range s.m {
			before := len(wl.ops)
			remain := wl.compact()
			removed += before - remain
			if remain == 0 {
				s.dropLocked(k, wl)
			}
		}
		s.mu.Unlock()
	}
	return removed
}

// Purge sweeps completed operations from the watch lists now and returns how many
// entries it removed. The reaper does this on its own; Purge is for callers that drive
// the clock themselves and for tests.
func (p *Purgatory[K]) Purge() int { return p.purge() }

// AdvanceClock expires every operation whose deadline is at or before now (milliseconds
// on the purgatory's clock), running their OnExpiration and OnComplete on the calling
// goroutine, and returns how many it expired. The reaper calls it; so do callers that
// gave New a Clock.
func (p *Purgatory[K]) AdvanceClock(now int64) int {
	t := p.timer
	t.advMu.Lock()
	defer t.advMu.Unlock()
	p.expired = t.advance(now, p.expired[:0])
	n := 0
	for _, d := range p.expired {
		if d.expire() {
			n++
		}
	}
	clear(p.expired)
	if p.wake == nil && p.needsPurge() {
		p.purge()
	}
	return n
}

// reap is the reaper goroutine: it advances the wheel whenever the earliest bucket is
// due, sleeping in between, and sweeps watch lists when they hold too many completed
// operations. An add that makes an earlier bucket the head wakes it.
func (p *Purgatory[K]) reap() {
	defer p.wg.Done()
	tm := time.NewTimer(time.Hour)
	tm.Stop()
	for {
		p.reaperLoops.Add(1)
		now := p.clock()
		p.AdvanceClock(now)
		if p.needsPurge() {
			p.purge()
		}
		wait := time.Duration(math.MaxInt64)
		if next, ok := p.timer.nextExpiration(); ok {
			now = p.clock() // callbacks and the purge took time
			if next <= now {
				continue
			}
			wait = time.Duration(next-now) * time.Millisecond
		} else if p.timer.hasDue() {
			continue
		}
		if wait != time.Duration(math.MaxInt64) {
			tm.Reset(wait)
		}
		select {
		case <-tm.C:
		case <-p.wake:
			tm.Stop()
		case <-p.done:
			tm.Stop()
			return
		}
	}
}

// Close stops the reaper and expires every pending operation (OnExpiration, then
// OnComplete) on the calling goroutine. Watch lists are emptied. Close is idempotent.
func (p *Purgatory[K]) Close() {
	if !p.closed.CompareAndSwap(false, true) {
		return
	}
	if p.done != nil {
		close(p.done)
		p.wg.Wait()
	}
	t := p.timer
	t.advMu.Lock()
	p.expired = t.close(p.expired[:0])
	for _, d := range p.expired {
		d.expire()
	}
	clear(p.expired)
	t.advMu.Unlock()
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		clear(s.m)
		s.free = nil
		s.mu.Unlock()
	}
}
