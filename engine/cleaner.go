package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// The log cleaner: compaction of the logs whose LogConfig.Compact is set,
// Kafka's design (LogCleaner, LogCleanerManager, Cleaner). See "Compaction"
// in the package doc for what a pass does and how its result is swapped in.
//
// Goroutines: Options.Cleaner.Threads cleaner goroutines (none with
// Disable or manualBackground) and the callers of Manager.Compact. A log is
// cleaned by one of them at a time (cleanState.inProgress).
// Manager.ReconfigureCleaner replaces the options at run time (Kafka's
// LogCleaner.reconfigure): the goroutines of the old options end after the
// pass they are in, and goroutines of the new ones start at once; a thread
// keeps the options it was made with, so none changes under a pass.
//
// Cleaning state of a log (Kafka's LogCleaningState), under cleaner.mu:
//
//	idle ──grab──▶ in progress ──done──▶ idle
//	                   │ abortAndPause
//	                   ▼
//	                aborted ──done──▶ paused(1) ──resume──▶ idle
//	idle ──abortAndPause──▶ paused(n) (n pauses, n resumes)
//
// A truncation and DeleteLog abort and pause the log's cleaning before they
// change it, and resume it after; the pass in progress notices the abort at
// its next batch and discards what it wrote.
type cleaner struct {
	m     *Manager
	opts  atomic.Pointer[CleanerOptions] // the current ones (ReconfigureCleaner)
	limit atomic.Pointer[rateLimiter]    // nil: no I/O limit
	// ctx is cancelled when the Manager stops: passes end at their next
	// batch, and a wait for the I/O limit at once.
	ctx    context.Context
	cancel context.CancelFunc

	mu   sync.Mutex
	cond *sync.Cond // a pass ended (waited on by abortAndPause)

	manualMu sync.Mutex
	manual   *cleanerThread // Manager.Compact's buffers, under manualMu

	reconfMu sync.Mutex
	quit     chan struct{} // closed to retire the running goroutines; under reconfMu
	manualBg bool          // no goroutines at all (tests); set at newCleaner

	wake chan struct{}

	stats   cleanerCounters
	lastRun atomic.Int64 // unix ms of the last look for a log to clean
}

// cleanState is a log's cleaning state, under cleaner.mu.
type cleanState struct {
	inProgress  bool
	aborted     bool
	paused      int
	uncleanable error // a pass failed on the log's content: not cleaned again until reopened or truncated
	retryAt     int64 // unix ms: after an I/O failure, not before
	lastCleaned int64 // unix ms of the last pass that completed
	lastErr     error
	cancel      context.CancelFunc // ends the pass in progress (its waits for the I/O limit)
}

type cleanerCounters struct {
	passes, aborted, failed                   atomic.Int64
	bytesRead, bytesWritten                   atomic.Int64
	recordsRead, recordsRetained              atomic.Int64
	batchesRead, batchesRetained, batchesEmpt atomic.Int64
	segmentsCleaned, swaps                    atomic.Int64
	lastPassNs, maxPassNs                     atomic.Int64
	lastBufferUtil                            atomic.Uint64 // float64 bits
}

// errCleanAborted ends a pass that was asked to stop (a truncation, a
// deletion, Close).
var errCleanAborted = errors.New("engine: cleaning aborted")

// errMapTooSmall is a batch with more records than the offset map takes.
var errMapTooSmall = fmt.Errorf("%w: a batch has more records than the cleaner's offset map takes (raise log.cleaner.dedupe.buffer.size or lower log.cleaner.threads)", ErrInvalidConfig)

func newCleaner(m *Manager, o CleanerOptions) *cleaner {
	c := &cleaner{m: m, wake: make(chan struct{}, 1)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.cond = sync.NewCond(&c.mu)
	c.setOptions(o.sanitized())
	return c
}

// options returns the current options (never nil).
func (c *cleaner) options() *CleanerOptions { return c.opts.Load() }

// setOptions makes o current: the I/O limit at once, the rest for the threads
// made from now on.
func (c *cleaner) setOptions(o CleanerOptions) {
	c.opts.Store(&o)
	if o.IOMaxBytesPerSecond > 0 {
		if r := c.limit.Load(); r != nil {
			r.setRate(o.IOMaxBytesPerSecond)
		} else {
			c.limit.Store(newRateLimiter(o.IOMaxBytesPerSecond))
		}
	} else {
		c.limit.Store(nil)
	}
}

// start runs the cleaner goroutines of the current options.
func (c *cleaner) start() {
	c.reconfMu.Lock()
	defer c.reconfMu.Unlock()
	c.startLocked()
}

func (c *cleaner) startLocked() {
	o := c.options()
	if o.Disable || c.stopping() {
		return
	}
	c.quit = make(chan struct{})
	for i := 0; i < o.Threads; i++ {
		t := c.newThread(i, o, c.quit)
		c.m.wg.Add(1)
		go func() {
			defer c.m.wg.Done()
			defer t.close()
			c.run(t)
		}()
	}
}

// ReconfigureCleaner applies new cleaner options (log.cleaner.* keys changed
// at run time, Kafka's LogCleaner.reconfigure): the I/O limit and the
// backoff at once; the goroutines of the old options end after their pass
// in progress and new ones start with the new options (their offset maps,
// buffers and number). Manager.Compact's buffers are remade at its next
// call. A Manager opened with manual background work starts no goroutines.
func (m *Manager) ReconfigureCleaner(o CleanerOptions) {
	c := m.cl
	c.reconfMu.Lock()
	defer c.reconfMu.Unlock()
	o = o.sanitized()
	if *c.options() == o {
		return
	}
	c.setOptions(o)
	if c.quit != nil {
		close(c.quit)
		c.quit = nil
	}
	if !c.manualBg {
		c.startLocked()
	}
}

// run is one cleaner goroutine: clean the filthiest log, or sleep for the
// backoff.
func (c *cleaner) run(t *cleanerThread) {
	for {
		if c.stopping() || t.retired() {
			return
		}
		l := c.grab(c.m.nowMs())
		if l != nil {
			c.cleanLog(t, l, false)
			continue
		}
		tm := time.NewTimer(c.options().Backoff)
		select {
		case <-c.ctx.Done():
			tm.Stop()
			return
		case <-t.quit:
			tm.Stop()
			return
		case <-c.wake:
			tm.Stop()
		case <-tm.C:
		}
	}
}

func (c *cleaner) stopping() bool { return c.ctx.Err() != nil }

// busyLocked reports whether l may not be taken for cleaning now.
func (c *cleaner) busyLocked(l *Log, now int64) bool {
	st := &l.cstate
	return st.inProgress || st.paused > 0 || st.uncleanable != nil || st.retryAt > now
}

// grab chooses the compacted log whose dirty ratio is highest among those
// past their min.cleanable.dirty.ratio (or past max.compaction.lag.ms with
// something to clean), and marks it in progress. nil: none.
func (c *cleaner) grab(now int64) *Log {
	c.lastRun.Store(now)
	var best *Log
	bestRatio := -1.0
	for _, l := range c.m.Logs() {
		cfg := l.cfg.Load()
		if !cfg.Compact || l.ld.offline.Load() {
			continue
		}
		c.mu.Lock()
		busy := c.busyLocked(l, now)
		c.mu.Unlock()
		if busy {
			continue
		}
		r, err := l.cleanableRange(now)
		if err != nil {
			continue
		}
		ok := r.needNow && r.dirtyBytes > 0 || r.ratio() > cfg.MinCleanableDirtyRatio && r.dirtyBytes > 0
		if ok && r.ratio() > bestRatio {
			best, bestRatio = l, r.ratio()
		}
	}
	if best == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busyLocked(best, now) {
		return nil
	}
	best.cstate.inProgress = true
	return best
}

// begin marks l in progress for Manager.Compact; false when it is busy.
func (c *cleaner) begin(l *Log, now int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busyLocked(l, now) {
		return false
	}
	l.cstate.inProgress = true
	return true
}

// done ends the pass of l begun by grab or begin, with its result.
func (c *cleaner) done(l *Log, cleaned bool, err error) {
	now := c.m.nowMs()
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &l.cstate
	st.inProgress = false
	st.cancel = nil
	l.cleanAbort.Store(false)
	if st.aborted {
		st.aborted = false
		st.paused++
		c.cond.Broadcast()
	}
	switch {
	case err == nil:
		if cleaned {
			st.lastCleaned = now
		}
		st.lastErr = nil
	case errors.Is(err, errCleanAborted), errors.Is(err, ErrClosed):
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrInvalidRecord), errors.Is(err, errMapTooSmall):
		st.uncleanable, st.lastErr = err, err
		c.m.logger.Error("log cleaner: log is uncleanable until it is truncated or the broker restarts", "tp", l.tp.String(), "err", err)
	default:
		st.retryAt, st.lastErr = now+c.options().Backoff.Milliseconds(), err
		c.m.reportIO(l.tp.String(), err, "op", "clean")
	}
}

// abortAndPause stops the pass cleaning l, if any, waiting until it has
// stopped, and keeps l from being cleaned until resume.
func (c *cleaner) abortAndPause(l *Log) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &l.cstate
	if !st.inProgress {
		st.paused++
		return
	}
	st.aborted = true
	l.cleanAbort.Store(true)
	if st.cancel != nil {
		st.cancel()
	}
	for st.inProgress {
		c.cond.Wait()
	}
}

// resume undoes one abortAndPause. A truncation also forgets that a log
// was uncleanable: what made it so may be gone.
func (c *cleaner) resume(l *Log, truncated bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.cstate.paused > 0 {
		l.cstate.paused--
	}
	if truncated {
		l.cstate.uncleanable = nil
	}
}

// cleanLog runs one pass over l, which grab or begin marked in progress.
// force cleans even below the dirty ratio (Manager.Compact).
func (c *cleaner) cleanLog(t *cleanerThread, l *Log, force bool) (bool, error) {
	now := c.m.nowMs()
	t0 := time.Now()
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	c.mu.Lock()
	l.cstate.cancel = cancel
	aborted := l.cstate.aborted
	c.mu.Unlock()
	var cleaned bool
	var err error
	if aborted {
		err = errCleanAborted
	} else {
		cleaned, err = t.clean(ctx, l, now, force)
	}
	if !cleaned && err == nil && !force {
		// Taken, but nothing to do after all (a transaction still open
		// holds the cleanable part): not again before the backoff.
		c.mu.Lock()
		l.cstate.retryAt = now + c.options().Backoff.Milliseconds()
		c.mu.Unlock()
	}
	c.done(l, cleaned, err)
	switch {
	case err == nil && cleaned:
		c.stats.passes.Add(1)
		d := time.Since(t0).Nanoseconds()
		c.stats.lastPassNs.Store(d)
		for {
			m := c.stats.maxPassNs.Load()
			if d <= m || c.stats.maxPassNs.CompareAndSwap(m, d) {
				break
			}
		}
		c.stats.lastBufferUtil.Store(math.Float64bits(t.omap.utilization()))
	case errors.Is(err, errCleanAborted):
		c.stats.aborted.Add(1)
	case err != nil && !errors.Is(err, ErrClosed):
		c.stats.failed.Add(1)
	}
	return cleaned, err
}

// Compact cleans now, on the calling goroutine, every log whose
// LogConfig.Compact is set, whatever its dirty ratio and the backoff:
// each such log that has segments to clean gets one pass
// (min.compaction.lag.ms, the high watermark and the active segment still
// bound what is cleaned). It returns how many logs were cleaned and the
// first error; a log being cleaned by a cleaner goroutine, paused or
// uncleanable is skipped.
func (m *Manager) Compact(ctx context.Context) (int, error) {
	c := m.cl
	c.manualMu.Lock()
	defer c.manualMu.Unlock()
	if o := c.options(); c.manual == nil || c.manual.opts != *o {
		if c.manual != nil {
			c.manual.close()
		}
		c.manual = c.newThread(-1, o, nil)
	}
	n := 0
	var first error
	for _, l := range m.Logs() {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if c.stopping() {
			return n, ErrClosed
		}
		if !l.cfg.Load().Compact || l.ld.offline.Load() || !c.begin(l, m.nowMs()) {
			continue
		}
		ok, err := c.cleanLog(c.manual, l, true)
		if ok {
			n++
		}
		if err != nil && first == nil && !errors.Is(err, errCleanAborted) {
			first = fmt.Errorf("compact %s: %w", l.tp, err)
		}
	}
	return n, first
}

// stop ends every pass at its next batch and waits for a Manager.Compact
// in progress (Close and abandon; the cleaner goroutines are waited for
// with the Manager's).
func (c *cleaner) stop() {
	c.reconfMu.Lock() // a ReconfigureCleaner after this starts nothing
	c.cancel()
	c.reconfMu.Unlock()
	c.manualMu.Lock()
	if c.manual != nil {
		c.manual.close()
		c.manual = nil
	}
	c.manualMu.Unlock()
}

// rateLimiter paces the cleaner goroutines' I/O together
// (log.cleaner.io.max.bytes.per.second covers them all): each takes what
// it reads or writes and, past the rate, sleeps until it is within it
// (a burst of one second's worth, at least 64 KiB). The sleep ends early
// when its context does (the pass is aborted, the Manager closes).
type rateLimiter struct {
	mu     sync.Mutex
	rate   float64 // bytes per second
	burst  float64
	tokens float64
	last   time.Time
}

func newRateLimiter(rate float64) *rateLimiter {
	b := max(rate, 64<<10)
	return &rateLimiter{rate: rate, burst: b, tokens: b, last: time.Now()}
}

// setRate changes the rate (ReconfigureCleaner); what the bucket holds stays.
func (r *rateLimiter) setRate(rate float64) {
	r.mu.Lock()
	r.rate, r.burst = rate, max(rate, 64<<10)
	r.tokens = min(r.tokens, r.burst)
	r.mu.Unlock()
}

func (r *rateLimiter) wait(ctx context.Context, n int64) error {
	r.mu.Lock()
	now := time.Now()
	r.tokens = min(r.burst, r.tokens+now.Sub(r.last).Seconds()*r.rate)
	r.last = now
	r.tokens -= float64(n)
	var d time.Duration
	if r.tokens < 0 {
		d = time.Duration(-r.tokens / r.rate * float64(time.Second))
	}
	r.mu.Unlock()
	if d == 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// CleanerStats describes the log cleaner (Manager.CleanerStats), Kafka's
// LogCleaner and LogCleanerManager metrics and per-log figures.
type CleanerStats struct {
	Passes          int64 // passes completed since Open
	Aborted         int64 // passes aborted (truncation, deletion, Close)
	Failed          int64 // passes failed (I/O, damaged or undecodable data)
	BytesRead       int64 // bytes of batches read (building the maps and copying)
	BytesWritten    int64 // bytes of cleaned segments written ("bytes cleaned")
	RecordsRead     int64 // records copied through the filter
	RecordsRetained int64
	BatchesRead     int64
	BatchesRetained int64 // batches written (with records or kept empty)
	EmptyBatches    int64 // of which kept with no records (a producer's last, a segment's last)
	SegmentsCleaned int64 // old segments replaced
	Swaps           int64 // cleaned segments swapped in
	LastPass        time.Duration
	MaxPass         time.Duration // Kafka's max-clean-time-secs
	// BufferUtilization is the offset map's fill after the last pass
	// (Kafka's max-buffer-utilization-percent, as a fraction).
	BufferUtilization float64
	// MaxDirtyRatio is the highest dirty ratio of the compacted logs now
	// (Kafka's max-dirty-percent, as a fraction).
	MaxDirtyRatio float64
	// MaxCompactionDelay is how far the most overdue log is past its
	// max.compaction.lag.ms (Kafka's max-compaction-delay-secs).
	MaxCompactionDelay time.Duration
	// TimeSinceLastRun is the time since a cleaner goroutine last looked for
	// a log to clean (Kafka's time-since-last-run-ms); -1 if never.
	TimeSinceLastRun time.Duration
	UncleanableLogs  int   // Kafka's uncleanable-partitions-count
	UncleanableBytes int64 // their cleanable bytes (Kafka's uncleanable-bytes)
	Logs             []LogCleanerStat
}

// LogCleanerStat describes the cleaning of one compacted log.
type LogCleanerStat struct {
	TP TopicPartition
	// FirstDirtyOffset is the first offset not yet cleaned (the cleaner
	// checkpoint, or the log start offset).
	FirstDirtyOffset int64
	// CleanBytes and DirtyBytes split the cleanable segments (the inactive
	// segments below the high watermark and min.compaction.lag.ms) into
	// the cleaned and not yet cleaned parts; DirtyRatio is
	// DirtyBytes/(CleanBytes+DirtyBytes).
	CleanBytes, DirtyBytes int64
	DirtyRatio             float64
	// Lag is the age of the first batch of the segment holding the first
	// dirty offset: how long the oldest record not yet compacted has
	// waited (0 when that segment is empty).
	Lag time.Duration
	// CompactionDelay is how far the log is past max.compaction.lag.ms.
	CompactionDelay time.Duration
	InProgress      bool
	Paused          bool
	Uncleanable     error     // why the log is not cleaned any more, if so
	LastError       error     // the last pass's error
	LastCleaned     time.Time // zero if never since Open
}

// CleanerStats returns the cleaner's counters and, for each compacted log,
// its dirty ratio and lag (computed now: it reads the headers of the first
// batches of dirty segments not read before).
func (m *Manager) CleanerStats() CleanerStats {
	c := m.cl
	st := CleanerStats{
		Passes: c.stats.passes.Load(), Aborted: c.stats.aborted.Load(), Failed: c.stats.failed.Load(),
		BytesRead: c.stats.bytesRead.Load(), BytesWritten: c.stats.bytesWritten.Load(),
		RecordsRead: c.stats.recordsRead.Load(), RecordsRetained: c.stats.recordsRetained.Load(),
		BatchesRead: c.stats.batchesRead.Load(), BatchesRetained: c.stats.batchesRetained.Load(),
		EmptyBatches: c.stats.batchesEmpt.Load(), SegmentsCleaned: c.stats.segmentsCleaned.Load(),
		Swaps: c.stats.swaps.Load(), LastPass: time.Duration(c.stats.lastPassNs.Load()),
		MaxPass: time.Duration(c.stats.maxPassNs.Load()), BufferUtilization: math.Float64frombits(c.stats.lastBufferUtil.Load()),
		TimeSinceLastRun: -1,
	}
	now := m.nowMs()
	if lr := c.lastRun.Load(); lr != 0 {
		st.TimeSinceLastRun = time.Duration(now-lr) * time.Millisecond
	}
	for _, l := range m.Logs() {
		if !l.cfg.Load().Compact {
			continue
		}
		r, err := l.cleanableRange(now)
		ls := LogCleanerStat{TP: l.tp}
		if err == nil {
			ls.FirstDirtyOffset, ls.CleanBytes, ls.DirtyBytes, ls.DirtyRatio = r.firstDirty, r.cleanBytes, r.dirtyBytes, r.ratio()
			ls.Lag = time.Duration(r.lagMs) * time.Millisecond
			ls.CompactionDelay = time.Duration(r.delayMs) * time.Millisecond
		}
		c.mu.Lock()
		cs := l.cstate
		c.mu.Unlock()
		ls.InProgress, ls.Paused, ls.Uncleanable, ls.LastError = cs.inProgress, cs.paused > 0, cs.uncleanable, cs.lastErr
		if cs.lastCleaned != 0 {
			ls.LastCleaned = time.UnixMilli(cs.lastCleaned)
		}
		if ls.Uncleanable != nil {
			st.UncleanableLogs++
			st.UncleanableBytes += ls.DirtyBytes
		}
		st.MaxDirtyRatio = max(st.MaxDirtyRatio, ls.DirtyRatio)
		st.MaxCompactionDelay = max(st.MaxCompactionDelay, ls.CompactionDelay)
		st.Logs = append(st.Logs, ls)
	}
	return st
}

// cleanRange is what a log has to clean now (Kafka's LogToClean and
// cleanableOffsets).
type cleanRange struct {
	firstDirty int64
	// upper is the first uncleanable offset: the least of the last
	// stable offset (at most the high watermark), the active segment's
	// base and the base of the first dirty segment within
	// min.compaction.lag.ms.
	upper int64
	// cleanable is how many segments, from the first, lie wholly below
	// upper: those a pass may rewrite.
	cleanable              int
	cleanBytes, dirtyBytes int64
	needNow                bool  // past max.compaction.lag.ms
	delayMs                int64 // how far past
	lagMs                  int64 // age of the first dirty batch
	invalidCheckpoint      bool  // the checkpointed first dirty offset lay outside the log
}

func (r *cleanRange) ratio() float64 {
	if r.cleanBytes+r.dirtyBytes == 0 {
		return 0
	}
	return float64(r.dirtyBytes) / float64(r.cleanBytes+r.dirtyBytes)
}

// cleanableRange computes what l has to clean at now (unix ms).
func (l *Log) cleanableRange(now int64) (cleanRange, error) {
	segs := l.pinAll()
	defer releaseAll(segs)
	return l.cleanableRangeOf(segs, now)
}

// cleanableRangeOf is cleanableRange over a pinned copy of the list.
func (l *Log) cleanableRangeOf(segs []*segment, now int64) (cleanRange, error) {
	var r cleanRange
	if len(segs) == 0 {
		return r, ErrClosed
	}
	cfg := l.cfg.Load()
	logStart, leo, lso := l.logStart.Load(), l.leo.Load(), l.LastStableOffset()
	fd := l.firstDirty.Load()
	if fd >= 0 && (fd < logStart || fd > leo) {
		r.invalidCheckpoint = true
	}
	if fd < logStart || fd > leo {
		fd = logStart
	}
	r.firstDirty = fd
	last := len(segs) - 1
	end := func(i int) int64 {
		if i < last {
			return segs[i+1].base
		}
		return leo
	}
	upper := min(lso, segs[last].base)
	if lag := cfg.MinCompactionLagMs; lag > 0 {
		for i := 0; i < last; i++ {
			if end(i) <= fd {
				continue
			}
			if segs[i].largestTimestamp(cfg) > now-lag {
				upper = min(upper, segs[i].base)
				break
			}
		}
	}
	r.upper = upper
	for r.cleanable < last && end(r.cleanable) <= upper {
		r.cleanable++
	}
	for i := 0; i < r.cleanable; i++ {
		if end(i) <= fd {
			r.cleanBytes += segs[i].size.Load()
		} else {
			r.dirtyBytes += segs[i].size.Load()
		}
	}
	// max.compaction.lag.ms: the earliest first batch of a dirty inactive
	// segment (Kafka's maxCompactionDelay).
	earliest := int64(math.MaxInt64)
	for i := 0; i < last; i++ {
		if end(i) <= fd {
			continue
		}
		if ts := segs[i].firstBatchTimestamp(); ts > 0 {
			earliest = min(earliest, ts)
		}
	}
	if earliest != math.MaxInt64 {
		if until := now - cfg.MaxCompactionLagMs; earliest < until {
			r.delayMs = until - earliest
			r.needNow = true
		}
	}
	if i := sortSearchSegs(segs, fd); i >= 0 {
		if ts := segs[i].firstBatchTimestamp(); ts > 0 && end(i) > fd {
			r.lagMs = max(now-ts, 0)
		}
	}
	return r, nil
}

// sortSearchSegs returns the index of the segment holding offset (the
// last with base <= offset), -1 if none.
func sortSearchSegs(segs []*segment, offset int64) int {
	lo, hi := 0, len(segs)-1
	if hi < 0 || segs[0].base > offset {
		return -1
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if segs[mid].base <= offset {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// firstBatchTimestamp is the max timestamp of the segment's first batch
// (Kafka's getFirstBatchTimestamp, what max.compaction.lag.ms counts
// from), read once; -1 for an empty segment or on a read error.
func (s *segment) firstBatchTimestamp() int64 {
	if ts := s.firstTs.Load(); ts != unknownTimestamp {
		return ts
	}
	if s.size.Load() < BatchHeaderSize {
		return -1 // not cached: the active segment fills up
	}
	var b [BatchHeaderSize]byte
	if _, err := s.log.ReadAt(b[:], 0); err != nil {
		return -1
	}
	h, err := ParseBatchHeader(b[:])
	if err != nil {
		return -1
	}
	s.firstTs.Store(h.MaxTimestamp)
	return h.MaxTimestamp
}
