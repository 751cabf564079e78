package engine

// Prewriting. Under the fsync policy a log that syncs small appends one or a
// few at a time (producers waiting for each acknowledgement) pays, in every
// fdatasync, for the metadata of a growing file: its new size and the
// allocation of its new blocks go through the file system's journal with the
// data. The active segment of such a log is therefore written ahead of its
// appends with zeros, a chunk at a time (prewriteMin doubling up to
// prewriteMax); the first sync after a chunk carries its allocation once, and
// the appends after it overwrite blocks that exist, so that their fdatasync
// carries data only. BenchmarkSmallWriteFdatasync measures the difference on
// the machine at hand (200-byte appends on ext4: about 0.4x the process CPU
// and 0.5x the time per sync of a growing file).
//
// The file is then longer than the segment: the bytes past size are zeros
// and nothing reads them (segment invariant 1: size is the end of the last
// whole batch). A roll and a clean close cut the file back to size, so that
// a segment that is not active, and any segment after a clean shutdown, ends
// on disk where its data ends, as Open expects. After a crash the active
// segment's recovery cuts the zeros where it cuts a torn tail, and counts
// them apart (RecoveryStats.PrewrittenBytesCut).
//
// A log whose flushes carry more than prewriteSmallSync bytes does not
// prewrite: the journal's cost per sync is spread over enough data there,
// and writing the bytes twice would cost bandwidth at the maximum rate.
// The zeros ahead in a log directory are bounded (prewriteDirBudget): with
// thousands of partitions taking a record now and then, a few hundred
// prewrite and the others grow as they go, so that neither the disk space
// nor a burst of zeros grows with the partition count.

const (
	prewriteMin       = 64 << 10
	prewriteMax       = 256 << 10
	prewriteSmallSync = 64 << 10 // a flush of at most this many bytes is small
	prewriteAfter     = 4        // consecutive small flushes before a log prewrites
	prewriteDirBudget = 64 << 20 // zeros ahead in one log directory, at most
)

// prewriteZeros is the source of the zeros (never written: its pages stay
// the shared zero page).
var prewriteZeros [prewriteMax]byte

// noteFlushed counts the log's consecutive small flushes (flush, after a
// successful sync of dirty bytes).
func (l *Log) noteFlushed(dirty int64) {
	if l.m.opts.Sync != SyncFsync || l.m.opts.NoPrewrite {
		return
	}
	if dirty > prewriteSmallSync {
		if l.smallFlushes.Load() != 0 {
			l.smallFlushes.Store(0)
		}
		return
	}
	if l.smallFlushes.Load() < prewriteAfter {
		l.smallFlushes.Add(1)
	}
}

// prewriteLocked writes zeros ahead of end, the segment's new size after an
// append, when the log prewrites and end has reached the zeros written so
// far. A failure (a full disk) is not the append's: the zeros that reached
// the file are cut off again and this segment prewrites no more; only a
// failed cut is returned (the caller takes the directory offline). The
// caller holds appendMu.
func (l *Log) prewriteLocked(seg *segment, end int64, cfg *LogConfig) error {
	if end < seg.prewritten || seg.noPrewrite || l.m.opts.Sync != SyncFsync || l.m.opts.NoPrewrite ||
		l.smallFlushes.Load() < prewriteAfter {
		return nil
	}
	chunk := max(seg.prewriteChunk, prewriteMin)
	to := min(end+chunk, cfg.SegmentBytes)
	from := max(seg.prewritten, end)
	budget := int64(prewriteDirBudget)
	if b := l.m.opts.prewriteBudget; b > 0 {
		budget = b
	}
	if to <= from || l.ld.ahead.Load()+(to-from) > budget {
		return nil
	}
	for off := from; off < to; {
		n := min(to-off, prewriteMax)
		if _, err := seg.log.WriteAt(prewriteZeros[:n], off); err != nil {
			seg.noPrewrite = true
			l.logger.Debug("writing ahead of the appends stopped", "base", seg.base, "err", err)
			if terr := seg.log.Truncate(end); terr != nil {
				return terr
			}
			l.dropPrewrittenLocked(seg) // seg.size is end: what was ahead before went too
			return nil
		}
		off += n
	}
	l.ld.ahead.Add(to - from)
	seg.prewritten = to
	seg.prewriteChunk = min(2*chunk, prewriteMax)
	return nil
}

// consumePrewrittenLocked accounts for an append that wrote [pos, end) over
// zeros written ahead. The caller holds appendMu.
func (l *Log) consumePrewrittenLocked(seg *segment, pos, end int64) {
	if seg.prewritten > pos {
		l.ld.ahead.Add(-(min(end, seg.prewritten) - pos))
	}
}

// dropPrewrittenLocked forgets the zeros past seg's size (the file is cut
// there, or goes). The caller holds appendMu, or the log is closing.
func (l *Log) dropPrewrittenLocked(seg *segment) {
	if n := seg.prewritten - seg.size.Load(); n > 0 {
		l.ld.ahead.Add(-n)
	}
	seg.prewritten = 0
}

// trimPrewrittenLocked cuts the zeros past size off s's file. trimmed says
// whether the file changed (its new size wants a sync to be durable). The
// caller holds appendMu.
func (l *Log) trimPrewrittenLocked(s *segment) (trimmed bool, err error) {
	if s.prewritten <= s.size.Load() {
		s.prewritten = 0
		return false, nil
	}
	if err := s.log.Truncate(s.size.Load()); err != nil {
		return false, err
	}
	l.dropPrewrittenLocked(s)
	return true, nil
}

// zeroTail says whether the bytes of w in [from, to) are all zero: the tail
// of a segment written ahead (prewriteLocked), not a torn or corrupt one.
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
