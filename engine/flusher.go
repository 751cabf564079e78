package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// logDir is one log.dirs entry: its logs' flusher (group commit) and its
// checkpoint files.
//
// Group commit: appenders queue their log (queueFlush) and, under the fsync
// policy, a waiter (addWaiter). A flusher goroutine of the directory (one of
// Options.FlushConcurrentRounds: a round may start while others are in their
// syncs) takes every log queued, fdatasyncs each dirty segment file of each queued log
// once (several logs at a time: flushLogs), advances the logs' recovery
// points, then takes the waiters queued until then and releases every one whose
// offset is now durable. Logs queued meanwhile go in the next round, so one
// fdatasync covers every appender that arrived during the previous; an append
// that came during the round is released by it when the round's sync of its
// log covered it (a log flushed after the append, or a write-back waited for
// after it: wbPlan.extend), and else goes back to the queue.
type logDir struct {
	path  string
	m     *Manager
	nlogs int // logs in the directory (under Manager.mu)
	// logsGen changes whenever a log is added to or removed from the directory
	// (under Manager.mu): the checkpoint writer then lists them again.
	logsGen uint64

	offline atomic.Bool  // err is set (read without mu on the append path)
	noSpace atomic.Bool  // an append found the file system full (UnwritableDirs)
	ahead   atomic.Int64 // bytes allocated ahead of appends in its active segments (prealloc.go)

	mu      sync.Mutex
	dirty   []*Log
	waiters []*waiter
	err     error // set when the directory failed I/O; wraps ErrLogDirOffline
	stopped bool  // the flusher has exited: waiters fail at once
	kick    chan struct{}

	histMu sync.Mutex
	hist   *hdrhistogram.Histogram // fdatasync latency, microseconds

	fsyncHist fsyncHist // the same latencies in FsyncBuckets (stats_fsync.go)

	fsSync vfs.FSSync // syncfs of the directory's file system, nil unless Options.FlushSyncfsMinLogs (flusher_syncfs.go)
	// writeback: a round of several logs may write them back and make them
	// durable with one cache flush (flusher_writeback.go).
	writeback bool

	flushStats flushStats   // the group commit's stages (stats_flush.go)
	kickAt     atomic.Int64 // monoNow of the first kick since the flusher last took one, 0 if none

	ckptMu      sync.Mutex
	lastCkpt    [4]string // content last written, per checkpoint file (under ckptMu)
	cleanerCkpt bool      // the cleaner checkpoint exists (under ckptMu, and at Open)
	ckpt        ckptCache // the directory's logs and the offsets last encoded (under ckptMu)
}

// waiter is one caller waiting for durability: either ch or done is set.
type waiter struct {
	l      *Log
	offset int64
	queued int64 // monoNow when it was queued (FlushStats.QueueWait)
	ch     chan error
	done   func(error)
}

// complete releases the waiter's caller. A callback waiter goes back to the pool
// here (the flusher holds the last reference to it); a channel waiter is returned by
// WaitDurable once it has received.
func (w *waiter) complete(err error) {
	if done := w.done; done != nil {
		w.done = nil
		putWaiter(w)
		done(err)
		return
	}
	w.ch <- err
}

var waiterPool = sync.Pool{New: func() any { return &waiter{ch: make(chan error, 1)} }}

func getWaiter() *waiter { return waiterPool.Get().(*waiter) }
func putWaiter(w *waiter) {
	w.l = nil
	waiterPool.Put(w)
}

func newLogDir(m *Manager, path string) *logDir {
	return &logDir{
		path: path,
		m:    m,
		kick: make(chan struct{}, 1),
		hist: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3),
	}
}

func (d *logDir) signal() {
	if d.kickAt.Load() == 0 {
		d.kickAt.CompareAndSwap(0, monoNow())
	}
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// queueFlush asks the flusher to sync l in its next round.
func (d *logDir) queueFlush(l *Log) { d.queueFlushHeld(l, nil) }

// queueFlushHeld is queueFlush whose wake-up of the flusher is left to h.Release
// (h nil: at once).
func (d *logDir) queueFlushHeld(l *Log, h *FlushHold) {
	if !l.flushQueued.CompareAndSwap(false, true) {
		return
	}
	d.mu.Lock()
	d.dirty = append(d.dirty, l)
	d.mu.Unlock()
	if h != nil {
		h.hold(d)
		return
	}
	d.signal()
}

// FlushHold gathers the flusher wake-ups of a group of appends and durability
// waits (one Produce request's partitions, one follower fetch answer's) into one
// per log directory, given by Release. Without it the first partition's append
// wakes the flusher, whose round then syncs that log alone while the request's
// other partitions are appended, and they wait for a second round: two
// fdatasyncs in a row before the request can be answered. With it, the round
// starts once the request's last partition is queued and syncs them together.
// Nothing waits on a clock: the hold lasts as long as the caller's own appends.
//
// A FlushHold is used by one goroutine at a time; every hold must end with
// Release, or the queued logs wait for another appender's wake-up. The zero
// value is ready.
type FlushHold struct {
	dirs []*logDir
}

func (h *FlushHold) hold(d *logDir) {
	for _, x := range h.dirs {
		if x == d {
			return
		}
	}
	h.dirs = append(h.dirs, d)
}

// Release wakes the flusher of every directory the hold queued work in, and
// empties h for reuse.
func (h *FlushHold) Release() {
	for i, d := range h.dirs {
		d.signal()
		h.dirs[i] = nil
	}
	h.dirs = h.dirs[:0]
}

// addWaiter registers w; it completes after the round that makes w.offset durable.
func (d *logDir) addWaiter(w *waiter) { d.addWaiterHeld(w, nil) }

// addWaiterHeld is addWaiter whose wake-up of the flusher is left to h.Release
// (h nil: at once).
func (d *logDir) addWaiterHeld(w *waiter, h *FlushHold) {
	d.mu.Lock()
	if d.err != nil || d.stopped {
		err := d.err
		if err == nil {
			err = ErrClosed
		}
		d.mu.Unlock()
		if w.l.recoveryPoint.Load() > w.offset {
			err = nil
		}
		w.complete(err)
		return
	}
	l := w.l // once queued, w belongs to the flusher, which may complete and reuse it
	w.queued = monoNow()
	d.waiters = append(d.waiters, w)
	d.mu.Unlock()
	d.queueFlushHeld(l, h) // queued already by another append: its wake-up may be held
	if h != nil {
		h.hold(d)
	} else {
		d.signal()
	}
}

// setOffline takes the directory offline for good (until the Manager is
// reopened): appends fail with ErrLogDirOffline and durability waiters with
// the cause. It is called when an fdatasync failed (after which the kernel
// may have dropped the dirty pages, so that a later fdatasync would report a
// success that is not one) or a partial write could not be undone.
func (d *logDir) setOffline(cause error) {
	d.mu.Lock()
	first := d.err == nil
	if first {
		d.err = fmt.Errorf("%w: %s: %w", ErrLogDirOffline, d.path, cause)
		d.offline.Store(true)
	}
	d.mu.Unlock()
	if first {
		d.m.report(d.path, failDirOffline, cause)
	}
}

// offlineErr is the directory's error, nil while it is online.
func (d *logDir) offlineErr() error {
	if !d.offline.Load() {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// run is the flusher goroutine. With Options.FlushConcurrentRounds above 1 it
// starts that many less one helpers, which take rounds while it is in one: a
// log that becomes dirty during another log's fdatasync is synced at once
// instead of after it (the same log is never synced by two rounds at once:
// Log.flushMu).
func (d *logDir) run(stop <-chan struct{}) {
	rounds := d.m.opts.FlushConcurrentRounds
	if rounds <= 0 {
		rounds = DefaultFlushConcurrentRounds
	}
	var helpers sync.WaitGroup
	for range rounds - 1 {
		helpers.Add(1)
		go func() {
			defer helpers.Done()
			d.runHelper(stop)
		}()
	}
	var tick <-chan time.Time
	if d.m.opts.Sync == SyncInterval {
		iv := d.m.opts.FlushInterval
		if iv <= 0 {
			iv = time.Second
		}
		t := time.NewTicker(iv)
		defer t.Stop()
		tick = t.C
	}
	var logs []*Log
	var ws []*waiter
	for {
		idle := monoNow()
		select {
		case <-d.kick:
		case <-tick:
			for _, l := range d.m.logsIn(d) {
				if l.dirtyBytes.Load() > 0 {
					d.queueFlush(l)
				}
			}
			continue
		case <-stop:
			// The helpers' rounds end first: a waiter one of them requeues
			// is then in the last round or failed, never left behind.
			helpers.Wait()
			d.round(&logs, &ws, monoNow())
			d.failWaiters(ErrClosed)
			return
		}
		d.kicked(&logs, &ws, idle)
	}
}

// runHelper takes rounds beside run until stop.
func (d *logDir) runHelper(stop <-chan struct{}) {
	var logs []*Log
	var ws []*waiter
	for {
		idle := monoNow()
		select {
		case <-d.kick:
			d.kicked(&logs, &ws, idle)
		case <-stop:
			return
		}
	}
}

// kicked runs the round of a kick received by a flusher goroutine idle since idle.
func (d *logDir) kicked(logs *[]*Log, ws *[]*waiter, idle int64) {
	start := monoNow()
	if k := d.kickAt.Swap(0); k >= idle {
		d.flushStats.wakeup.observe(time.Duration(start - k))
	}
	d.round(logs, ws, start)
}

// round is one group commit; start is when the flusher began it (monoNow).
func (d *logDir) round(logs *[]*Log, ws *[]*waiter, start int64) {
	d.mu.Lock()
	*logs, d.dirty = d.dirty, (*logs)[:0]
	if d.m.opts.earlyWaiters {
		*ws, d.waiters = d.waiters, (*ws)[:0]
	}
	d.mu.Unlock()
	for _, l := range *logs {
		l.flushQueued.Store(false)
	}
	fs := &d.flushStats
	synced := start
	if len(*logs) > 0 {
		var files int
		byFS := d.useFSSync(len(*logs))
		byWB := false
		switch {
		case byFS:
			files = d.flushLogsFS(*logs)
		case d.writeback && len(*logs) >= 2:
			files, byWB = d.flushLogsWB(*logs)
		default:
			files = d.flushLogs(*logs)
		}
		synced = monoNow()
		fs.syncPhase.observe(time.Duration(synced - start))
		if files > 0 {
			fs.files.observe(files)
		}
		switch {
		case byFS:
			fs.syncfs.Add(1)
		case byWB:
			fs.writeback.Add(1)
		case len(*logs) < flushParallelMin:
			fs.serial.Add(1)
		default:
			fs.parallel.Add(1)
		}
	}
	// The waiters are taken once the syncs are done, not at the round's start:
	// those queued while the round ran whose offsets it made durable (their
	// logs flushed, or written back, after their appends) are released by it
	// rather than by the next round.
	d.mu.Lock()
	derr := d.err
	if !d.m.opts.earlyWaiters {
		*ws, d.waiters = d.waiters, (*ws)[:0]
	}
	d.mu.Unlock()
	// Waiters not durable yet go back to the queue, for the next round: kept at
	// the front of *ws, their logs in *logs (the round's logs are synced).
	again := (*ws)[:0]
	*logs = (*logs)[:0]
	for _, w := range *ws {
		switch {
		case w.l.recoveryPoint.Load() > w.offset:
			// Its wait for the round that released it: none if it came
			// while the round ran.
			fs.queue.observe(time.Duration(max(0, start-w.queued)))
			w.complete(nil)
		case derr != nil:
			w.complete(derr)
		case w.l.isClosed():
			w.complete(ErrClosed)
		case w.offset >= w.l.leo.Load():
			// Truncated away (or never written): nothing will make it durable.
			w.complete(ErrOffsetOutOfRange)
		default:
			again = append(again, w)
			*logs = append(*logs, w.l)
		}
	}
	if len(again) > 0 {
		// Once queued, a waiter may be completed and reused by another round:
		// their logs were read out before.
		d.mu.Lock()
		d.waiters = append(d.waiters, again...)
		d.mu.Unlock()
		// A log appended to while this round was taking the queue may have
		// been left out of it (flushQueued was still set): queued again.
		for _, l := range *logs {
			d.queueFlush(l)
		}
	}
	if len(*ws) > 0 {
		fs.release.observe(time.Duration(monoNow() - synced))
	}
	clear((*logs)[:cap(*logs)])
	clear((*ws)[:cap(*ws)])
	if len(again) > 0 {
		d.signal()
	}
}

// DefaultFlushConcurrentRounds is Options.FlushConcurrentRounds' default: one
// round at a time. With six producers each waiting for its own log's appends,
// four rounds at once cut the time to durability by 63%
// (BenchmarkConcurrentRounds), but at latency-20k (one producer, six
// partitions) the broker's publish p50 was higher with four in 5 of 6
// alternated compare rounds (BENCHMARKS.md "The group commit's stages").
const DefaultFlushConcurrentRounds = 1

// flushParallel bounds the logs one round syncs at once, and flushParallelMin is
// the smallest round that syncs in parallel. A file system commits the metadata of
// concurrent fdatasyncs together (ext4's journal takes every inode waiting in one
// commit), so syncing n files k at a time costs about n/k commits, not n: 2,000
// freshly appended files took 0.66 s one at a time and 0.11 s four at a time on
// the machine of BENCHMARKS.md. A round of a few logs stays on the flusher's
// goroutine (no wake-ups).
const (
	flushParallel    = 8
	flushParallelMin = 4
)

// flushLogs flushes every log of a round, up to flushParallel at once, and
// returns the number of files synced. A failed sync takes the directory offline.
func (d *logDir) flushLogs(logs []*Log) int {
	if len(logs) < flushParallelMin { // no closure: nothing allocated
		n := 0
		for _, l := range logs {
			n += d.flushOne(l)
		}
		return n
	}
	var files atomic.Int64
	eachParallel(logs, func(l *Log) { files.Add(int64(d.flushOne(l))) })
	return int(files.Load())
}

// eachParallel calls one for every log, up to flushParallel at once: the calling
// goroutine and flushParallel-1 helpers take the logs in turn.
func eachParallel(logs []*Log, one func(*Log)) {
	var next atomic.Int64
	work := func() {
		for {
			i := next.Add(1) - 1
			if i >= int64(len(logs)) {
				return
			}
			one(logs[i])
		}
	}
	helpers := min(len(logs), flushParallel) - 1
	var wg sync.WaitGroup
	wg.Add(helpers)
	for range helpers {
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}

// flushOne flushes l for a round and returns the files it synced; a failed sync
// takes the directory offline.
func (d *logDir) flushOne(l *Log) int {
	n, err := l.flush()
	d.flushed(l, err)
	return n
}

// flushed takes the directory offline when l's flush failed.
func (d *logDir) flushed(l *Log, err error) {
	if err != nil {
		d.m.reportIO(l.tp.String(), err, "op", "fdatasync")
		d.setOffline(err)
	}
}

// flushLogsFree is flushLogs for a round that holds other logs' flushMu (the
// plans of a write-back round): a log whose flush another round holds is not
// waited for, since that round may be waiting for one of this round's logs (each
// with the other's in its rest), but returned in busy, to be flushed once this
// round's own are released.
func (d *logDir) flushLogsFree(logs []*Log) (files int, busy []*Log) {
	var mu sync.Mutex
	var n atomic.Int64
	one := func(l *Log) {
		f, b, err := l.tryFlush()
		d.flushed(l, err)
		n.Add(int64(f))
		if b {
			mu.Lock()
			busy = append(busy, l)
			mu.Unlock()
		}
	}
	if len(logs) < flushParallelMin {
		for _, l := range logs {
			one(l)
		}
	} else {
		eachParallel(logs, one)
	}
	return int(n.Load()), busy
}

func (d *logDir) failWaiters(err error) {
	d.mu.Lock()
	d.stopped = true
	ws := d.waiters
	d.waiters = nil
	d.mu.Unlock()
	for _, w := range ws {
		if w.l.recoveryPoint.Load() > w.offset {
			w.complete(nil)
		} else {
			w.complete(err)
		}
	}
}

func (d *logDir) recordSync(dur time.Duration) {
	d.fsyncHist.observe(dur)
	us := dur.Microseconds()
	if us < 1 {
		us = 1
	}
	d.histMu.Lock()
	d.hist.RecordValue(us)
	d.histMu.Unlock()
}

func (l *Log) isClosed() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.closed
}

// flush fdatasyncs every segment that may hold data above the recovery point
// (and the indexes of those no longer active), then advances the recovery
// point to the log end offset read before the syncs. files is the number of
// files it synced (counted by kind in the directory's FlushStats).
func (l *Log) flush() (files int, err error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.flushLocked()
}

// tryFlush is flush unless another flush holds l (busy: nothing done). A round
// holding other logs' flushMu uses it: waiting for l could wait for a round that
// waits for one of its own.
func (l *Log) tryFlush() (files int, busy bool, err error) {
	if !l.flushMu.TryLock() {
		return 0, true, nil
	}
	defer l.flushMu.Unlock()
	files, err = l.flushLocked()
	return files, false, err
}

// flushLocked is flush; the caller holds flushMu.
func (l *Log) flushLocked() (files int, err error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return 0, nil
	}
	leo := l.leo.Load()
	dirty := l.dirtyBytes.Load()
	rp := l.recoveryPoint.Load()
	if leo <= rp && dirty == 0 {
		l.mu.RUnlock()
		return 0, nil
	}
	i := l.segmentForLocked(rp)
	var buf [4]*segment
	segs := append(buf[:0], l.segs[i:]...)
	for _, s := range segs {
		s.pin()
	}
	active := l.segs[len(l.segs)-1]
	l.mu.RUnlock()
	for _, s := range segs {
		var n int
		n, err = l.syncSegment(s, s == active, err)
		files += n
	}
	releaseAll(segs)
	if err != nil {
		return files, err
	}
	n, err := l.syncEpochsAndDir()
	files += n
	if err != nil {
		return files, err
	}
	l.flushed(dirty, leo)
	return files, nil
}

// countSyncs counts n syncs of kind in the directory's FlushStats and returns n.
func (l *Log) countSyncs(kind, n int) int {
	if n > 0 {
		l.ld.flushStats.syncs[kind].Add(uint64(n))
	}
	return n
}

// syncSegment fdatasyncs s (for the active segment of a log that writes ahead,
// noting how much of the file the sync covers), its transaction index, and the
// offset and time indexes of a segment no longer active. err is the flush's
// first error so far: a segment's indexes count as synced only when nothing of
// the flush failed. It returns the files synced and the flush's first error.
func (l *Log) syncSegment(s *segment, active bool, err error) (files int, _ error) {
	// The active segment of a log that writes ahead: how much of the file
	// this sync covers, for the write-back rounds (flusher_writeback.go).
	var cover syncedMark
	if active && l.ld.writeback {
		cover = s.mark()
	}
	t0 := time.Now()
	e := flushSync(s.log)
	if e != nil && err == nil {
		err = e
	}
	l.ld.recordSync(time.Since(t0))
	if e == nil {
		s.synced.covered(cover)
	}
	files += l.countSyncs(SyncKindSegment, 1)
	synced, e := s.syncTxnCounted()
	if e != nil && err == nil {
		err = e
	}
	if synced {
		files += l.countSyncs(SyncKindTxnIndex, 1)
	}
	if !active && !s.idxSynced && !s.deleted.Load() {
		s.idxMu.Lock()
		if s.oidx != nil {
			n := 0
			if s.oidx.dirty {
				n++
			}
			if s.tidx.dirty {
				n++
			}
			files += l.countSyncs(SyncKindIndex, n)
			if e := s.oidx.syncLocked(); e != nil && err == nil {
				err = e
			}
			if e := s.tidx.syncLocked(); e != nil && err == nil {
				err = e
			}
		}
		s.idxSynced = err == nil
		s.idxMu.Unlock()
	}
	return files, err
}

// syncEpochsAndDir makes durable, after the segments synced, a new segment's
// name and the leader-epoch checkpoint. It returns the files synced.
func (l *Log) syncEpochsAndDir() (files int, err error) {
	// A new segment's name is durable only with its directory: without it
	// a power loss could take the file, synced data and all.
	dirDirty := l.dirDirty.Swap(false)
	// The leader-epoch checkpoint of an epoch that began since the last
	// flush (the append path leaves it to us: assignLater). Its write ends
	// with a sync of the same directory, which then covers the new segment's
	// name too (a log's first flush did both, one after the other).
	var wrote bool
	if wrote, err = l.epochs.persistIfDirtyCounted(); wrote {
		files += l.countSyncs(SyncKindEpochs, 1)
		if err == nil {
			dirDirty = false
		}
	}
	if dirDirty && err == nil {
		files += l.countSyncs(SyncKindDir, 1)
		err = l.fs.SyncDir(l.dir)
	}
	if dirDirty && err != nil {
		l.dirDirty.Store(true)
	}
	return files, err
}

// flushed records a successful flush: the dirty bytes it read are durable, and so is
// everything below leo, the log end it read before its syncs (the recovery point
// only moves up: another round may have taken it further).
func (l *Log) flushed(dirty, leo int64) {
	l.dirtyBytes.Add(-dirty)
	l.noteFlushed(dirty)
	for {
		cur := l.recoveryPoint.Load()
		if leo <= cur || l.recoveryPoint.CompareAndSwap(cur, leo) {
			break
		}
	}
}

// FsyncStats summarises fdatasync latency over all log directories.
type FsyncStats struct {
	P50, P99, P999, Max time.Duration
	Count               int64
}

// FsyncLatency merges the directories' fdatasync histograms.
func (m *Manager) FsyncLatency() FsyncStats {
	h := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	for _, d := range m.dirs {
		d.histMu.Lock()
		h.Merge(d.hist)
		d.histMu.Unlock()
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return FsyncStats{
		P50: us(h.ValueAtQuantile(50)), P99: us(h.ValueAtQuantile(99)), P999: us(h.ValueAtQuantile(99.9)),
		Max: us(h.Max()), Count: h.TotalCount(),
	}
}

// Flush makes everything appended so far durable now (fdatasync of the
// segments above the recovery point, and of their directory when a segment
// was created), whatever the sync policy, and advances the recovery point.
// A failure takes the log directory offline, as in the flusher.
func (l *Log) Flush() error {
	if err := l.ld.offlineErr(); err != nil {
		return err
	}
	if _, err := l.flush(); err != nil {
		l.m.reportIO(l.tp.String(), err, "op", "fdatasync")
		l.ld.setOffline(err)
		return l.ld.offlineErr()
	}
	return nil
}
