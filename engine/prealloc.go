package engine

// Preallocation. Under the fsync policy a producer waiting for each
// acknowledgement makes a log sync a few KiB at a time, and every fdatasync
// of a file that grows carries the file system's metadata of the growth: the
// new size, and the allocation of the new blocks, go through the journal with
// the data. The active segment of such a log therefore has its next blocks
// written with zeros ahead of its appends, a chunk at a time (preallocMin
// doubling up to preallocMax), preallocLead before the appends need it; the
// chunk's write-back is started at once (sync_file_range), so that it is done
// before the appends reach it; the next fdatasync carries its allocation once,
// and the appends overwrite blocks that exist, so that their fdatasync
// carries data only.
//
// Zeros, not fallocate: fallocate's blocks are unwritten extents, and the
// first write into each block converts its extent, a journal commit again;
// an append of a few KiB reaches a new block at nearly every sync.
// BenchmarkSmallWriteFdatasync and BenchmarkSmallAppendFsync measure the
// layouts side by side (BENCHMARKS.md, "Preallocated segments").
//
// The file is then longer than the segment: the bytes past size are zeros
// and nothing reads them (segment invariant 1: size is the end of the last
// whole batch). A roll and a clean close cut the file back to size, so that a
// segment that is not active, and any segment after a clean shutdown, ends on
// disk where its data ends, as Open expects. After a crash the active
// segment's recovery cuts the zeros where it cuts a torn tail, and counts them
// apart (RecoveryStats.PreallocatedBytesCut).
//
// Only a log whose last preallocAfter flushes each carried at most
// preallocSmallSync bytes preallocates: there the journal's cost is most of a
// sync, while a log of larger flushes spreads it over enough data, and writing
// its bytes twice would cost bandwidth at the maximum rate. The zeros ahead in
// one log directory are bounded (preallocDirBudget): with thousands of active
// partitions a few hundred preallocate and the others grow as they go, so
// that neither the space nor a burst of zeros grows with the partition count.
// A failed write of zeros (a full disk) makes the segment grow as it goes.

const (
	preallocMin       = 64 << 10
	preallocMax       = 256 << 10
	preallocLead      = 64 << 10 // the next chunk is written once the appends come this close to the end of the zeros
	preallocSmallSync = 64 << 10 // a flush of at most this many bytes is small
	preallocAfter     = 4        // consecutive small flushes before a log preallocates
	preallocDirBudget = 64 << 20 // zeros ahead in one log directory, at most
)

// preallocZeros is the source of the zeros (never written: its pages stay
// the shared zero page).
var preallocZeros [preallocMax]byte

// noteFlushed counts the log's consecutive small flushes, up to
// preallocAfter (flush, after a successful sync of dirty bytes).
func (l *Log) noteFlushed(dirty int64) {
	if l.m.opts.Sync != SyncFsync || l.m.opts.NoPrealloc {
		return
	}
	if dirty > preallocSmallSync {
		if l.flushes.Load() != 0 {
			l.flushes.Store(0)
		}
		return
	}
	if l.flushes.Load() < preallocAfter {
		l.flushes.Add(1)
	}
}

// preallocLocked writes the next chunk of zeros, and starts its write-back,
// when the log preallocates and end, the segment's new size after an append,
// has come within preallocLead of the end of the zeros written so far: the
// appends then reach the new chunk only after its write-back has had time to
// finish, so that the fdatasyncs in between (which wait for every page of the
// file under write-back) seldom wait for it. A failure (a full disk) is not the
// append's: the zeros that reached the file are cut off again and this
// segment preallocates no more; only a failed cut is returned (the caller
// takes the directory offline). The caller holds appendMu.
func (l *Log) preallocLocked(seg *segment, end int64, cfg *LogConfig) error {
	if seg.preallocated-end >= preallocLead || seg.noPrealloc || l.m.opts.Sync != SyncFsync || l.m.opts.NoPrealloc ||
		l.flushes.Load() < preallocAfter {
		return nil
	}
	chunk := max(seg.preallocChunk, preallocMin)
	from := max(seg.preallocated, end)
	to := min(from+chunk, cfg.SegmentBytes)
	budget := int64(preallocDirBudget)
	if b := l.m.opts.preallocBudget; b > 0 {
		budget = b
	}
	if to <= from || l.ld.ahead.Load()+(to-from) > budget {
		return nil
	}
	var err error
	for off := from; off < to && err == nil; off += preallocMax {
		_, err = seg.log.WriteAt(preallocZeros[:min(to-off, preallocMax)], off)
	}
	if err != nil {
		seg.noPrealloc = true
		l.logger.Debug("writing zeros ahead of the active segment stopped", "base", seg.base, "err", err)
		if terr := seg.cutFile(end); terr != nil {
			return terr
		}
		l.dropPreallocLocked(seg) // seg.size is end: what was ahead before went too
		return nil
	}
	startWriteback(seg.log, from, to-from)
	l.ld.ahead.Add(to - from)
	seg.preallocated = to
	seg.synced.zeros.Store(to)
	seg.preallocChunk = min(2*chunk, preallocMax)
	return nil
}

// consumePreallocLocked accounts for an append that wrote [pos, end) over
// zeros written ahead. The caller holds appendMu.
func (l *Log) consumePreallocLocked(seg *segment, pos, end int64) {
	if seg.preallocated > pos {
		l.ld.ahead.Add(-(min(end, seg.preallocated) - pos))
	}
}

// dropPreallocLocked forgets the zeros past seg's size (the file is cut
// there, or goes). The caller holds appendMu, or the log is closing.
func (l *Log) dropPreallocLocked(seg *segment) {
	if n := seg.preallocated - seg.size.Load(); n > 0 {
		l.ld.ahead.Add(-n)
	}
	seg.preallocated = 0
	seg.synced.zeros.Store(0)
}

// trimPreallocLocked cuts the zeros past size off s's file. trimmed says
// whether the file changed (its new size wants a sync to be durable). The
// caller holds appendMu.
func (l *Log) trimPreallocLocked(s *segment) (trimmed bool, err error) {
	if s.preallocated <= s.size.Load() {
		s.preallocated = 0
		s.synced.zeros.Store(0)
		return false, nil
	}
	if err := s.cutFile(s.size.Load()); err != nil {
		return false, err
	}
	l.dropPreallocLocked(s)
	return true, nil
}

// zeroTail says whether the bytes of w in [from, to) are all zero: the tail
// of a segment written ahead (preallocLocked), not a torn or corrupt one.
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
