package engine

// Preallocation. Under the fsync policy a producer waiting for each
// acknowledgement makes a log sync a few KiB at a time, and every fdatasync
// of a file that grows carries the file system's metadata of the growth: the
// new size, and the allocation of the new blocks, go through the journal with
// the data. The active segment of such a log therefore has its blocks
// allocated ahead of its appends (fallocate, a chunk at a time: preallocMin
// doubling up to preallocMax). The allocation reaches the journal once, with
// the first sync after it; the syncs after that carry no size change. The
// blocks are unwritten extents: no byte is written twice and no zero is
// written back, and reads of them give zeros. BenchmarkSmallWriteFdatasync
// measures it beside a growing file and one whose zeros were written and
// synced ahead (BENCHMARKS.md, "Preallocated segments").
//
// The file is then longer than the segment: the bytes past size read as zeros
// and nothing reads them (segment invariant 1: size is the end of the last
// whole batch). A roll and a clean close cut the file back to size, so that a
// segment that is not active, and any segment after a clean shutdown, ends on
// disk where its data ends, as Open expects. After a crash the active
// segment's recovery cuts the zeros where it cuts a torn tail, and counts them
// apart (RecoveryStats.PreallocatedBytesCut).
//
// A log preallocates once it has been flushed preallocAfter times (a partition
// that takes a record now and then gets no chunk), and the chunks ahead in one
// log directory are bounded (preallocDirBudget): with thousands of active
// partitions a few hundred preallocate and the others grow as they go, so
// that the space reserved does not grow with the partition count. A file
// system without fallocate (or a full one) makes the segment grow as it goes.

const (
	preallocMin       = 64 << 10
	preallocMax       = 256 << 10
	preallocAfter     = 4        // flushes of a log before it preallocates
	preallocDirBudget = 64 << 20 // space allocated ahead in one log directory, at most
)

// noteFlushed counts the log's flushes, up to preallocAfter (flush, after a
// successful sync of dirty bytes).
func (l *Log) noteFlushed() {
	if l.m.opts.Sync != SyncFsync || l.m.opts.NoPrealloc {
		return
	}
	if l.flushes.Load() < preallocAfter {
		l.flushes.Add(1)
	}
}

// preallocLocked allocates blocks ahead of end, the segment's new size after
// an append, when the log preallocates and end has reached the blocks
// allocated so far. A failure (a full disk, a file system without fallocate)
// is not the append's: whatever it allocated past end is cut off again and
// this segment preallocates no more; only a failed cut is returned (the
// caller takes the directory offline). The caller holds appendMu.
func (l *Log) preallocLocked(seg *segment, end int64, cfg *LogConfig) error {
	if end < seg.preallocated || seg.noPrealloc || l.m.opts.Sync != SyncFsync || l.m.opts.NoPrealloc ||
		l.flushes.Load() < preallocAfter {
		return nil
	}
	chunk := max(seg.preallocChunk, preallocMin)
	to := min(end+chunk, cfg.SegmentBytes)
	from := max(seg.preallocated, end)
	budget := int64(preallocDirBudget)
	if b := l.m.opts.preallocBudget; b > 0 {
		budget = b
	}
	if to <= from || l.ld.ahead.Load()+(to-from) > budget {
		return nil
	}
	if err := allocateRange(seg.log, from, to-from); err != nil {
		seg.noPrealloc = true
		l.logger.Debug("preallocation of the active segment stopped", "base", seg.base, "err", err)
		if terr := seg.log.Truncate(end); terr != nil {
			return terr
		}
		l.dropPreallocLocked(seg) // seg.size is end: what was ahead before went too
		return nil
	}
	l.ld.ahead.Add(to - from)
	seg.preallocated = to
	seg.preallocChunk = min(2*chunk, preallocMax)
	return nil
}

// consumePreallocLocked accounts for an append that wrote [pos, end) into
// blocks allocated ahead. The caller holds appendMu.
func (l *Log) consumePreallocLocked(seg *segment, pos, end int64) {
	if seg.preallocated > pos {
		l.ld.ahead.Add(-(min(end, seg.preallocated) - pos))
	}
}

// dropPreallocLocked forgets the blocks past seg's size (the file is cut
// there, or goes). The caller holds appendMu, or the log is closing.
func (l *Log) dropPreallocLocked(seg *segment) {
	if n := seg.preallocated - seg.size.Load(); n > 0 {
		l.ld.ahead.Add(-n)
	}
	seg.preallocated = 0
}

// trimPreallocLocked cuts the blocks past size off s's file. trimmed says
// whether the file changed (its new size wants a sync to be durable). The
// caller holds appendMu.
func (l *Log) trimPreallocLocked(s *segment) (trimmed bool, err error) {
	if s.preallocated <= s.size.Load() {
		s.preallocated = 0
		return false, nil
	}
	if err := s.log.Truncate(s.size.Load()); err != nil {
		return false, err
	}
	l.dropPreallocLocked(s)
	return true, nil
}

// zeroTail says whether the bytes of w in [from, to) are all zero: the tail
// of a segment allocated ahead (preallocLocked), not a torn or corrupt one.
func zeroTail(w *window, from, to int64) (bool, error) {
	for from < to {
		n := min(to-from, int64(len(w.buf)))
		b, err := w.at(from, int(n))
		if err != nil {
			return false, err
		}
		for _, c := range b {
			if c != 0 {
				return false, nil
			}
		}
		from += n
	}
	return true, nil
}
