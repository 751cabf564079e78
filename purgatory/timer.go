package purgatory

import (
	"math"
	"sync"
	"sync/atomic"
)

// timerEntry is the intrusive link that puts one Delayed into one bucket. It lives inside
// the Delayed, so adding an operation to the wheel allocates nothing.
//
// expiration is written once, before the entry is first added, and read afterwards only
// under the timer's lock. list is nil while the entry is in no bucket; it changes only
// under the lock of the bucket it names (and is read atomically by cancel).
type timerEntry struct {
	expiration int64 // absolute, in clock milliseconds
	list       atomic.Pointer[bucket]
	next, prev *timerEntry
	op         *Delayed // nil for a bucket's sentinel
}

// remove unlinks e from whatever bucket holds it. It is idempotent and safe to race with
// the reaper moving e from one bucket to another: it retries until e is in no list.
func (e *timerEntry) remove() {
	for l := e.list.Load(); l != nil; l = e.list.Load() {
		l.remove(e)
	}
}

// bucket is one slot of a wheel (Kafka's TimerTaskList): a circular doubly linked list,
// under its own mutex, of entries whose expirations fall in one tick of that wheel.
//
// Invariants:
//  1. expiration is -1 or the start of the tick the bucket currently stands for; it is set
//     when the first entry for that tick arrives and reset to -1 when the bucket is flushed.
//  2. A bucket is in the delay queue at most once: it is offered only when its expiration
//     changes, and its expiration changes again only after the queue hands it back.
type bucket struct {
	mu         sync.Mutex
	root       timerEntry // sentinel; root.next is the oldest entry
	expiration atomic.Int64
	size       *atomic.Int64 // the timer's count of linked entries
}

func (b *bucket) init(size *atomic.Int64) {
	b.root.next, b.root.prev = &b.root, &b.root
	b.expiration.Store(-1)
	b.size = size
}

// setExpiration reports whether the expiration changed (the bucket must then be queued).
func (b *bucket) setExpiration(exp int64) bool { return b.expiration.Swap(exp) != exp }

// add links e, which must be in no list, at the tail.
func (b *bucket) add(e *timerEntry) {
	b.mu.Lock()
	tail := b.root.prev
	e.next, e.prev = &b.root, tail
	tail.next = e
	b.root.prev = e
	e.list.Store(b)
	b.mu.Unlock()
	b.size.Add(1)
}

func (b *bucket) remove(e *timerEntry) {
	b.mu.Lock()
	if e.list.Load() == b {
		e.next.prev = e.prev
		e.prev.next = e.next
		e.next, e.prev = nil, nil
		e.list.Store(nil)
		b.size.Add(-1)
	}
	b.mu.Unlock()
}

// detach unlinks every entry, resets the expiration and appends the entries to dst.
func (b *bucket) detach(dst []*timerEntry) []*timerEntry {
	b.mu.Lock()
	n := 0
	for e := b.root.next; e != &b.root; {
		next := e.next
		e.next, e.prev = nil, nil
		e.list.Store(nil)
		dst = append(dst, e)
		e = next
		n++
	}
	b.root.next, b.root.prev = &b.root, &b.root
	b.expiration.Store(-1)
	b.mu.Unlock()
	b.size.Add(int64(-n))
	return dst
}

// delayQueue is a min-heap of buckets by expiration (Kafka uses a java DelayQueue). The
// expiration is captured when the bucket is offered, so the heap order never depends on
// a value that moves underneath it.
type delayQueue struct {
	mu    sync.Mutex
	items []queued
}

type queued struct {
	exp int64
	b   *bucket
}

// offer queues b and reports whether it became the head (the reaper must then re-arm).
func (q *delayQueue) offer(b *bucket, exp int64) bool {
	q.mu.Lock()
	q.items = append(q.items, queued{exp, b})
	i := len(q.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if q.items[p].exp <= q.items[i].exp {
			break
		}
		q.items[p], q.items[i] = q.items[i], q.items[p]
		i = p
	}
	head := i == 0
	q.mu.Unlock()
	return head
}

// pollDue pops the head if it expires at or before now.
func (q *delayQueue) pollDue(now int64) (*bucket, int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 || q.items[0].exp > now {
		return nil, 0, false
	}
	top := q.items[0]
	last := len(q.items) - 1
	q.items[0] = q.items[last]
	q.items[last] = queued{}
	q.items = q.items[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && q.items[l].exp < q.items[m].exp {
			m = l
		}
		if r < last && q.items[r].exp < q.items[m].exp {
			m = r
		}
		if m == i {
			break
		}
		q.items[m], q.items[i] = q.items[i], q.items[m]
		i = m
	}
	return top.b, top.exp, true
}

// head returns the earliest queued expiration.
func (q *delayQueue) head() (int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return 0, false
	}
	return q.items[0].exp, true
}

// timingWheel is one level of the hierarchy (Kafka's TimingWheel). Level 0 has buckets of
// one tick; level k+1 has buckets as wide as all of level k (its interval).
//
// currentTime is a multiple of tick, changes only under the timer's write lock, and never
// passes the expiration of a bucket still in the delay queue: the timer advances the
// wheel only to the expiration of the bucket it just took from the queue, or to a time
// at which no queued bucket remains due.
type timingWheel struct {
	tick        int64
	size        int64
	interval    int64
	currentTime int64
	buckets     []bucket
	queue       *delayQueue
	counter     *atomic.Int64
	overflow    atomic.Pointer[timingWheel]
	overflowMu  sync.Mutex
	onNewHead   func()
}

func newTimingWheel(tick, size, start int64, queue *delayQueue, counter *atomic.Int64, onNewHead func()) *timingWheel {
	w := &timingWheel{
		tick:        tick,
		size:        size,
		interval:    satMul(tick, size),
		currentTime: start - start%tick,
		buckets:     make([]bucket, size),
		queue:       queue,
		counter:     counter,
		onNewHead:   onNewHead,
	}
	for i := range w.buckets {
		w.buckets[i].init(counter)
	}
	return w
}

func satMul(a, b int64) int64 {
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// overflowWheel returns the next level, creating it on first use.
func (w *timingWheel) overflowWheel() *timingWheel {
	if o := w.overflow.Load(); o != nil {
		return o
	}
	w.overflowMu.Lock()
	defer w.overflowMu.Unlock()
	if o := w.overflow.Load(); o != nil {
		return o
	}
	o := newTimingWheel(w.interval, w.size, w.currentTime, w.queue, w.counter, w.onNewHead)
	w.overflow.Store(o)
	return o
}

// add links e into the right bucket of this level or a higher one. It returns false if
// e is already due (expires before the end of the current tick). Caller holds the timer's
// read lock.
func (w *timingWheel) add(e *timerEntry) bool {
	exp := e.expiration
	if exp < satAdd(w.currentTime, w.tick) {
		return false
	}
	if exp < satAdd(w.currentTime, w.interval) || w.interval == math.MaxInt64 {
		vid := exp / w.tick
		b := &w.buckets[vid%w.size]
		b.add(e)
		if b.setExpiration(vid * w.tick) {
			if w.queue.offer(b, vid*w.tick) && w.onNewHead != nil {
				w.onNewHead()
			}
		}
		return true
	}
	return w.overflowWheel().add(e)
}

// advanceClock moves this level (and the levels above) to t, rounded down to a tick.
// Caller holds the timer's write lock.
func (w *timingWheel) advanceClock(t int64) {
	if t >= satAdd(w.currentTime, w.tick) {
		w.currentTime = t - t%w.tick
		if o := w.overflow.Load(); o != nil {
			o.advanceClock(w.currentTime)
		}
	}
}

// levels counts the wheels created so far (for tests).
func (w *timingWheel) levels() int {
	n := 0
	for ; w != nil; w = w.overflow.Load() {
		n++
	}
	return n
}

// timer is the hierarchical timing wheel with its delay queue (Kafka's SystemTimer).
//
// Lock order: advMu → mu → bucket.mu → queue.mu, and mu → dueMu. Adds hold mu for reading, so they
// run in parallel with each other and with cancels (which take only a bucket lock); the
// clock advance holds mu for writing. Expired operations run with no timer lock held.
type timer struct {
	advMu   sync.Mutex // serialises advance and close; guards scratch
	mu      sync.RWMutex
	wheel   *timingWheel
	queue   delayQueue
	size    atomic.Int64
	closed  bool // guarded by mu
	scratch []*timerEntry

	dueMu sync.Mutex
	due   []*Delayed // already expired when added; run by the next advance
}

func newTimer(tick, wheelSize, start int64, onNewHead func()) *timer {
	t := &timer{}
	t.wheel = newTimingWheel(tick, wheelSize, start, &t.queue, &t.size, onNewHead)
	return t
}

// add schedules d at d.entry.expiration. It returns false if the operation is already
// due; it is then queued on t.due for the next advance (or, once the timer is closed,
// the caller must expire it).
func (t *timer) add(d *Delayed) (scheduled, closed bool) {
	e := &d.entry
	t.mu.RLock()
	if t.closed {
		t.mu.RUnlock()
		return false, true
	}
	if d.completed.Load() {
		t.mu.RUnlock()
		return true, false
	}
	ok := t.wheel.add(e)
	if !ok {
		// Queue it while still holding the read lock, so close (which takes the write
		// lock before draining due) cannot miss it.
		t.dueMu.Lock()
		t.due = append(t.due, d)
		t.dueMu.Unlock()
	}
	t.mu.RUnlock()
	if ok {
		// A completion that ran between the check above and the link saw no list to
		// unlink from; whichever of us sees the other's write cleans up.
		if d.completed.Load() {
			e.remove()
		}
		return true, false
	}
	return false, false
}

// advance expires every bucket due at now, re-files entries of higher levels into lower
// ones, and appends the operations that expired to dst.
func (t *timer) advance(now int64, dst []*Delayed) []*Delayed {
	t.mu.Lock()
	for {
		b, exp, ok := t.queue.pollDue(now)
		if !ok {
			break
		}
		t.wheel.advanceClock(exp)
		t.scratch = b.detach(t.scratch[:0])
		for _, e := range t.scratch {
			if e.op.completed.Load() {
				continue
			}
			if !t.wheel.add(e) {
				dst = append(dst, e.op)
			} else if e.op.completed.Load() {
				e.remove()
			}
		}
	}
	if !t.closed {
		t.wheel.advanceClock(now)
	}
	t.mu.Unlock()
	clear(t.scratch)
	t.dueMu.Lock()
	dst = append(dst, t.due...)
	clear(t.due)
	t.due = t.due[:0]
	t.dueMu.Unlock()
	return dst
}

// close empties the wheel and appends every pending operation to dst. Later adds report
// closed.
func (t *timer) close(dst []*Delayed) []*Delayed {
	t.mu.Lock()
	t.closed = true
	for {
		b, _, ok := t.queue.pollDue(math.MaxInt64)
		if !ok {
			break
		}
		t.scratch = b.detach(t.scratch[:0])
		for _, e := range t.scratch {
			if !e.op.completed.Load() {
				dst = append(dst, e.op)
			}
		}
	}
	t.mu.Unlock()
	clear(t.scratch)
	t.dueMu.Lock()
	dst = append(dst, t.due...)
	t.due = nil
	t.dueMu.Unlock()
	return dst
}

// nextExpiration is the earliest bucket expiration, if any bucket is queued.
func (t *timer) nextExpiration() (int64, bool) { return t.queue.head() }

// hasDue reports whether operations wait on t.due.
func (t *timer) hasDue() bool {
	t.dueMu.Lock()
	defer t.dueMu.Unlock()
	return len(t.due) > 0
}
