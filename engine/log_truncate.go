package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/samsa-broker/samsa/internal/invariants"
)

// TruncateTo removes every record at or after offset (a follower that
// diverged from its leader). A batch that straddles offset goes whole, and
// the log end offset becomes its base offset. Below the log start offset it
// is TruncateFullyAndStartAt.
func (l *Log) TruncateTo(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, offset)
	}
	if offset >= l.leo.Load() && !l.isClosed() && l.ld.offlineErr() == nil {
		return nil // nothing to cut (appends only raise the log end)
	}
	// The cleaner's pass over this log, if any, is stopped first (and its
	// cleaned files dropped): it read what is being cut.
	l.m.cl.abortAndPause(l)
	defer l.m.cl.resume(l, true)
	l.segMu.Lock()
	defer l.segMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	// No flush may run across a truncation: it would move the recovery point
	// to a log end read before the cut, over records appended after it.
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err := l.ld.offlineErr(); err != nil {
		return err
	}
	if offset >= l.leo.Load() {
		return nil
	}
	if offset < l.logStart.Load() {
		return l.truncateFullyLocked(offset)
	}
	cfg := l.cfg.Load()
	l.mu.RLock()
	i := l.segmentForLocked(offset)
	s := l.segs[i]
	l.mu.RUnlock()
	// What can fail without harm goes first: s becomes the active segment.
	if err := s.makeWritable(cfg); err != nil {
		l.m.reportIO(l.tp.String(), err, "op", "truncate")
		return ioFailure(fmt.Sprintf("truncate %s", l.tp), err)
	}

	pos, newEnd, err := s.cutPoint(offset, cfg)
	if err != nil {
		l.m.reportIO(l.tp.String(), err, "op", "truncate")
		return ioFailure(fmt.Sprintf("truncate %s", l.tp), err)
	}

	// The truncation is durable before anything is appended after it: a
	// crash must not bring the cut records back under new ones.
	ferr := l.cutDurablyLocked(i, s, pos, newEnd)
	l.size.Add(pos - s.size.Load())
	s.moveEndTo(pos, newEnd)
	if err := l.lowerToLocked(newEnd); err != nil {
		return err
	}
	if ferr == nil {
		ferr = l.checkpointLowerRecoveryPoint()
	}
	return ferr
}

// cutDurablyLocked drops the segments after segment i (scheduled for deletion),
// cuts s's file at pos and its transaction index at newEnd, and syncs both (and
// the directory if segments went). A failure takes the log directory offline and
// is returned; the caller goes on cutting the log's state in memory.
func (l *Log) cutDurablyLocked(i int, s *segment, pos, newEnd int64) error {
	l.mu.Lock()
	gone := append([]*segment(nil), l.segs[i+1:]...)
	l.segs = l.segs[:i+1]
	l.mu.Unlock()
	var derr error
	for _, g := range gone {
		l.size.Add(-g.size.Load())
		if err := g.markDeleted(); err != nil && derr == nil {
			derr = err
		}
		l.m.scheduleDelete(g, 0)
	}
	l.dropPreallocLocked(s) // any blocks allocated ahead go with the cut
	terr := s.cutFile(pos)
	if terr == nil {
		terr = s.log.Datasync()
	}
	if terr == nil {
		terr = s.truncateTxn(newEnd)
	}
	if derr == nil && len(gone) > 0 {
		derr = l.fs.SyncDir(l.dir)
	}
	if err := errors.Join(terr, derr); err != nil {
		l.m.reportIO(l.tp.String(), err, "op", "truncate")
		l.ld.setOffline(err)
		return ioFailure(fmt.Sprintf("truncate %s", l.tp), err)
	}
	return nil
}

// moveEndTo sets the active segment s's size to pos and its next offset to
// newEnd, and cuts its offset and time indexes to match: its largest timestamp
// is the time index's last, and its first timestamp unknown.
func (s *segment) moveEndTo(pos, newEnd int64) {
	s.size.Store(pos)
	s.next.Store(newEnd)
	s.idxMu.Lock()
	s.forgetTailLocked()
	s.oidx.truncateToLocked(newEnd)
	n := s.oidx.entries
	for n > 0 && int64(s.oidx.posAt(n-1)) >= pos {
		n--
	}
	s.oidx.setEntriesLocked(n)
	s.tidx.truncateToLocked(newEnd)
	var lastPos int64
	if _, p, ok := s.oidx.lastEntry(); ok {
		lastPos = p
	}
	if ts, off, ok := s.tidx.lastEntry(); ok {
		s.maxTs.Store(ts)
		s.offMax.Store(off)
	} else {
		s.maxTs.Store(-1)
		s.offMax.Store(s.base)
	}
	s.idxMu.Unlock()
	s.bytesSinceIndex = pos - lastPos
	s.rollAtMs = 0
	s.firstTs.Store(unknownTimestamp)
}

// lowerToLocked brings the log's offsets and state down to the new log end
// newEnd: the first dirty offset, damage, high watermark, recovery point, leader
// epochs, producer snapshots and producer state.
func (l *Log) lowerToLocked(newEnd int64) error {
	if fd := l.firstDirty.Load(); fd > newEnd {
		l.firstDirty.Store(newEnd) // Kafka's maybeTruncateCheckpoint
	}
	l.pruneDamage()
	l.leo.Store(newEnd)
	if l.hw.Load() > newEnd {
		l.hw.Store(newEnd)
	}
	if invariants.Enabled {
		l.checkHWLocked("truncation")
	}
	if l.recoveryPoint.Load() > newEnd {
		l.recoveryPoint.Store(newEnd)
	}
	if err := l.epochs.truncateFromEnd(newEnd); err != nil {
		return err
	}
	removeSnapshots(l.fs, l.dir, 0, newEnd)
	l.rebuildProducerState(newEnd, math.MaxInt64) // reads only: no error
	return nil
}

// checkpointLowerRecoveryPoint writes the directory's checkpoints after a
// truncation lowered the recovery point, before anything is appended: a
// recovery point checkpointed above the cut would make the next recovery
// skip the segments holding what is appended after it (as Kafka, which
// checkpoints at every truncation).
func (l *Log) checkpointLowerRecoveryPoint() error {
	if err := l.m.writeDirCheckpoints(l.ld); err != nil {
		l.m.reportIO(l.tp.String(), err, "op", "checkpoint")
		l.ld.setOffline(err)
		return ioFailure(fmt.Sprintf("truncate %s", l.tp), err)
	}
	return nil
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log at
// offset (a follower too far behind its leader).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: start at %d", ErrOffsetOutOfRange, offset)
	}
	l.m.cl.abortAndPause(l)
	defer l.m.cl.resume(l, true)
	l.segMu.Lock()
	defer l.segMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.flushMu.Lock() // as in TruncateTo
	defer l.flushMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err := l.ld.offlineErr(); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset)
}

func (l *Log) truncateFullyLocked(offset int64) error {
	cfg := l.cfg.Load()
	l.mu.Lock()
	old := l.segs
	var derr error
	for _, s := range old {
		if err := s.markDeleted(); err != nil && derr == nil {
			derr = err
		}
	}
	s, err := createSegment(l.m, l.dir, offset, cfg, false)
	if err != nil {
		lost := false
		for _, o := range old {
			o.unmarkDeleted()
			if _, serr := l.fs.Stat(o.path(logSuffix)); serr != nil {
				lost = true // removed, not renamed: it cannot come back
			}
		}
		l.mu.Unlock()
		l.m.reportIO(l.tp.String(), err, "op", "truncate")
		if lost {
			l.ld.setOffline(err)
		}
		return ioFailure(fmt.Sprintf("truncate %s", l.tp), err)
	}
	l.dirDirty.Store(true)
	l.dropPreallocLocked(old[len(old)-1]) // deleted, blocks ahead and all
	l.segs = []*segment{s}
	l.pruneDamageLocked()
	l.leo.Store(offset)
	l.logStart.Store(offset)
	l.hw.Store(offset)
	if invariants.Enabled {
		l.checkHWLocked("full truncation")
	}
	l.recoveryPoint.Store(offset)
	l.size.Store(0)
	l.dirtyBytes.Store(0)
	l.firstDirty.Store(-1)
	l.mu.Unlock()
	for _, o := range old {
		l.m.scheduleDelete(o, 0)
	}
	l.prod = newProducerStates()
	l.prod.attach(&l.txns)
	removeSnapshots(l.fs, l.dir, math.MaxInt64, -1)
	l.snapAt = -1
	if err := l.epochs.clear(); err != nil {
		return err
	}
	if derr == nil {
		derr = l.fs.SyncDir(l.dir)
	}
	if derr != nil {
		l.m.reportIO(l.tp.String(), derr, "op", "truncate")
		l.ld.setOffline(derr)
		return ioFailure(fmt.Sprintf("truncate %s", l.tp), derr)
	}
	return l.checkpointLowerRecoveryPoint()
}

// cutPoint finds where TruncateTo(offset) cuts s: the position of the first
// batch whose last offset reaches offset (or of a batch that cannot be
// parsed), and the new log end there. An I/O error is returned: nothing
// may be cut on a guess.
func (s *segment) cutPoint(offset int64, cfg *LogConfig) (pos, newEnd int64, err error) {
	sc := getScanner(s.log, s.size.Load())
	defer putScanner(sc)
	from := s.lookupPos(offset, sc, cfg)
	for attempt := 0; attempt < 2; attempt++ {
		pos, next := from, s.base
		for pos < sc.limit {
			h, err := sc.header(pos)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					return 0, 0, err
				}
				break
			}
			if h.LastOffset() >= offset {
				return pos, min(offset, h.BaseOffset), nil
			}
			next = h.LastOffset() + 1
			pos += h.Size()
		}
		if pos >= sc.limit {
			return min(pos, s.size.Load()), offset, nil
		}
		// A batch that does not parse: cut there. The log end is the offset
		// after the batch before it, which a walk from the start knows.
		if from == 0 {
			return pos, min(offset, next), nil
		}
		from = 0
	}
	return 0, 0, fmt.Errorf("%w: segment %d: no cut point for %d", ErrCorruptBatch, s.base, offset)
}
