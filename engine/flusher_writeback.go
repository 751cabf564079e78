package engine

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// Rounds made durable by one cache flush. A round of several logs under the fsync
// policy costs an fdatasync per log, and on a virtual disk most of an fdatasync of a
// few KiB is the flush of the device's write cache that ends it: a round of four
// logs with a 12.5 KiB append each took 435 µs and 240 µs of the process's CPU
// with an fdatasync per log (four at once), 234 µs and 140 µs written back and
// ended by one fdatasync (BenchmarkWritebackRound; BENCHMARKS.md, "One cache flush
// per round").
//
// A log qualifies when everything it has to make durable is an overwrite of blocks
// a completed fdatasync already covered: its one segment above the recovery point
// is the active one, its appends end within the file length that segment's last
// fdatasync saw (the zeros written ahead, prealloc.go), no new name, leader epoch
// or transaction index entry waits for a sync. Its size and block allocation are
// then durable already, and its data needs only to reach the device and a cache
// flush after it. The round starts the write-back of every qualifying log's file,
// fdatasyncs the others as usual, waits for the write-backs (sync_file_range
// WAIT_BEFORE|WRITE|WAIT_AFTER, which reports the file's write-back errors), and
// fdatasyncs the last qualifying file: its cache flush covers the others' writes,
// completed before it began. Only then do the logs' recovery points move. Just
// before its wait (or the last fdatasync), a log's plan takes in what was appended
// to it since (wbPlan.extend): the round's waiters are taken after its syncs, so
// those appends' acknowledgements leave with the round instead of the next one.
//
// Where it applies: Options.Sync is SyncFsync, and the directory's file system is
// one whose every fdatasync flushes the device's cache (ext4, XFS; tmpfs, where
// nothing is durable anyway: vfs.SyncFlushesCache). Elsewhere, and with
// Options.NoFlushWriteback, every file has its own fdatasync.

// openWriteback decides whether the directory's rounds may use one cache flush.
func (d *logDir) openWriteback() {
	o := &d.m.opts
	d.writeback = o.Sync == SyncFsync && !o.NoFlushWriteback && !o.NoPrealloc && vfs.SyncFlushesCache(d.m.fs, d.path)
}

// syncedLen is how much of a segment's file a completed fdatasync covered.
type syncedLen struct {
	// zeros mirrors segment.preallocated (the end of the zeros written ahead, 0 if
	// none), stored after the zeros were written: with size, a length the file had
	// reached, read without the appender's lock.
	zeros atomic.Int64

	mu   sync.Mutex
	n    int64  // the file's length when the fdatasync began
	cuts uint64 // truncations of the file so far
}

// syncedMark is what a sync about to begin covers: ok only when it was read.
type syncedMark struct {
	n    int64
	cuts uint64
	ok   bool
}

// mark reads, before the fdatasync of s's file, a length the file has reached:
// what the sync covers at least.
func (s *segment) mark() syncedMark {
	s.synced.mu.Lock()
	cuts := s.synced.cuts
	s.synced.mu.Unlock()
	return syncedMark{n: max(s.size.Load(), s.synced.zeros.Load()), cuts: cuts, ok: true}
}

// covered records that the fdatasync begun after m succeeded: unless the file was
// cut since m, its first m.n bytes have durable metadata.
func (s *syncedLen) covered(m syncedMark) {
	if !m.ok {
		return
	}
	s.mu.Lock()
	if s.cuts == m.cuts && m.n > s.n {
		s.n = m.n
	}
	s.mu.Unlock()
}

// end is the length of the file with durable metadata.
func (s *syncedLen) end() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// cutFile truncates the segment's file to n. Whatever a sync covered past n no
// longer counts: appends that grow the file again need an fdatasync of their own.
//
// Against a flush running beside it (a cut by the appender: an undone write, the
// zeros' cut at a roll or after a failed write; TruncateTo holds flushMu): zeros
// is cleared before the truncation and cuts counted after it, and mark reads cuts
// before the lengths, so a mark that read a length from before the cut carries
// the old count and covered ignores it. The size it reads is never past n: these
// cuts do not lower it.
func (s *segment) cutFile(n int64) error {
	s.synced.zeros.Store(0)
	err := s.log.Truncate(n)
	s.synced.mu.Lock()
	s.synced.cuts++
	s.synced.n = min(s.synced.n, n)
	s.synced.mu.Unlock()
	return err
}

// wbPlan is one qualifying log's share of a write-back round, read under its
// locks: flushMu stays held and the segment pinned until finish.
type wbPlan struct {
	l     *Log
	seg   *segment
	w     vfs.Writeback
	leo   int64 // the log end offset before the round: the new recovery point
	dirty int64 // dirtyBytes before the round
}

// planWB returns l's share of a write-back round; false when l does not qualify
// (or another round holds it): the round then flushes it the usual way. empty
// says that l has nothing to sync (closed, or made durable already by an earlier
// round's extend): the round leaves it out, and an append after the round took
// the queue has queued it again.
func (l *Log) planWB() (_ wbPlan, ok, empty bool) {
	if !l.flushMu.TryLock() {
		return wbPlan{}, false, false
	}
	l.mu.RLock()
	leo := l.leo.Load()
	dirty := l.dirtyBytes.Load()
	rp := l.recoveryPoint.Load()
	if l.closed || leo <= rp && dirty == 0 {
		l.mu.RUnlock()
		l.flushMu.Unlock()
		return wbPlan{}, false, true
	}
	if l.segmentForLocked(rp) != len(l.segs)-1 || l.dirDirty.Load() {
		l.mu.RUnlock()
		l.flushMu.Unlock()
		return wbPlan{}, false, false
	}
	seg := l.segs[len(l.segs)-1]
	seg.pin()
	l.mu.RUnlock()
	// Checked under flushMu, which only a flush takes to clear them: an epoch,
	// a transaction index entry or a growth of the file from before the log end
	// read above is still there to see.
	w, ok := seg.log.(vfs.Writeback)
	if !ok || l.epochs.isDirty() || !seg.tix.clean() || seg.size.Load() > seg.synced.end() {
		seg.release()
		l.flushMu.Unlock()
		return wbPlan{}, false, false
	}
	return wbPlan{l: l, seg: seg, w: w, leo: leo, dirty: dirty}, true, false
}

// extend moves p's end up to the log's end now, just before the round waits for
// the write-back of p's file (or fdatasyncs it, the round's last): appends that
// came while the round was starting its write-backs and syncing its other logs
// are then durable with it, instead of in the next round. The wait about to
// begin (WAIT_BEFORE|WRITE|WAIT_AFTER) writes back every page dirty when it is
// called, so it covers every byte appended before the log end read here, and the
// round's fdatasync after it flushes the device's cache over them. It extends
// only when the appends since the plan still qualify as planWB asks (the same
// active segment, within the file length with durable metadata, no new leader
// epoch or transaction index entry, no new name), read under appendMu, taken
// only if free (out of the lock order, so never waited for): between appends
// every one of them is whole, its epochs and index entries noted.
func (p *wbPlan) extend() {
	l := p.l
	if l.m.opts.earlyWaiters || !l.appendMu.TryLock() {
		return
	}
	defer l.appendMu.Unlock()
	l.mu.RLock()
	leo := l.leo.Load()
	dirty := l.dirtyBytes.Load()
	same := !l.closed && l.segs[len(l.segs)-1] == p.seg
	l.mu.RUnlock()
	if !same || leo <= p.leo || l.dirDirty.Load() || l.epochs.isDirty() || !p.seg.tix.clean() ||
		p.seg.size.Load() > p.seg.synced.end() {
		return
	}
	p.leo, p.dirty = leo, dirty
}

// finish ends p's share of the round: on success what the plan read is durable.
func (p *wbPlan) finish(err error) {
	if err == nil {
		p.l.flushed(p.dirty, p.leo)
	}
	p.release()
}

// release gives back what planWB took.
func (p *wbPlan) release() {
	p.seg.release()
	p.l.flushMu.Unlock()
}

// flushLogsWB flushes a round's logs, the qualifying ones by write-back and one
// cache flush when there are at least two of them (else the usual way: ok false).
// It returns the files synced or written back. A failure takes the directory
// offline, as a failed fdatasync does.
func (d *logDir) flushLogsWB(logs []*Log) (files int, ok bool) {
	var plans []wbPlan
	var rest []*Log
	for _, l := range logs {
		switch p, ok, empty := l.planWB(); {
		case ok:
			plans = append(plans, p)
		case !empty:
			rest = append(rest, l)
		}
	}
	if len(plans) < 2 {
		for i := range plans {
			plans[i].release()
			rest = append(rest, plans[i].l)
		}
		return d.flushLogs(rest), false
	}
	for i := range plans {
		startWriteback(plans[i].seg.log, 0, 0)
	}
	var busy []*Log
	if len(rest) > 0 {
		files, busy = d.flushLogsFree(rest)
	}
	var err error
	var failed *Log
	op := "sync_file_range"
	for i := range plans[:len(plans)-1] {
		plans[i].extend()
		if err = plans[i].w.WaitWriteback(); err != nil {
			failed = plans[i].l
			break
		}
	}
	last := &plans[len(plans)-1]
	if err == nil {
		last.extend()
		t0 := time.Now()
		err = flushSync(last.seg.log)
		d.recordSync(time.Since(t0))
		failed, op = last.l, "fdatasync"
	}
	syncs := &d.flushStats.syncs
	syncs[SyncKindWriteback].Add(uint64(len(plans) - 1))
	syncs[SyncKindSegment].Add(1)
	for i := range plans {
		plans[i].finish(err)
	}
	if err != nil {
		d.m.reportIO(failed.tp.String(), err, "op", op)
		d.setOffline(err)
	}
	if len(busy) > 0 { // this round's flushMu are released: waiting is safe now
		files += d.flushLogs(busy)
	}
	return files + len(plans), true
}

// isDirty reports whether entries changed since the file was written.
func (c *epochCache) isDirty() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.dirty
}

// clean reports whether every entry written to the file is durable.
func (t *txnIndex) clean() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.f == nil || t.synced >= t.fileEnts
}
