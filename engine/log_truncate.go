package engine

import (
	"fmt"
	"math"
)

// TruncateTo removes every record at or after offset (a follower that
// diverged from its leader). A batch that straddles offset goes whole, and
// the log end offset becomes its base offset. Below the log start offset it
// is TruncateFullyAndStartAt.
func (l *Log) TruncateTo(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, offset)
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if offset >= l.leo.Load() {
		return nil
	}
	if offset < l.logStart.Load() {
		return l.truncateFullyLocked(offset)
	}
	cfg := l.cfg.Load()
	l.mu.Lock()
	i := l.segmentForLocked(offset)
	gone := append([]*segment(nil), l.segs[i+1:]...)
	l.segs = l.segs[:i+1]
	s := l.segs[i]
	l.mu.Unlock()
	for _, g := range gone {
		l.size.Add(-g.size.Load())
		g.markDeleted()
		l.m.scheduleDelete(g, 0)
	}

	// Cut s at the first batch whose last offset reaches offset.
	newEnd := offset
	sc := getScanner(s.log, s.size.Load())
	pos := s.lookupPos(offset, sc, cfg)
	for pos < sc.limit {
		h, err := sc.header(pos)
		if err != nil {
			break
		}
		if h.LastOffset() >= offset {
			newEnd = min(offset, h.BaseOffset)
			break
		}
		pos += h.Size()
	}
	putScanner(sc)
	if pos > s.size.Load() {
		pos = s.size.Load()
	}
	if err := s.makeWritable(cfg); err != nil {
		return err
	}
	if err := s.log.Truncate(pos); err != nil {
		l.ld.setOffline(err)
		return err
	}
	l.size.Add(pos - s.size.Load())
	s.size.Store(pos)
	s.next.Store(newEnd)
	s.idxMu.Lock()
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

	l.leo.Store(newEnd)
	if l.hw.Load() > newEnd {
		l.hw.Store(newEnd)
	}
	if l.recoveryPoint.Load() > newEnd {
		l.recoveryPoint.Store(newEnd)
	}
	if err := l.epochs.truncateFromEnd(newEnd); err != nil {
		return err
	}
	removeSnapshots(l.fs, l.dir, 0, newEnd)
	l.rebuildProducerState(newEnd)
	return nil
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log at
// offset (a follower too far behind its leader).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: start at %d", ErrOffsetOutOfRange, offset)
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.truncateFullyLocked(offset)
}

func (l *Log) truncateFullyLocked(offset int64) error {
	cfg := l.cfg.Load()
	l.mu.Lock()
	old := l.segs
	for _, s := range old {
		s.markDeleted()
	}
	s, err := createSegment(l.fs, l.dir, offset, cfg)
	if err != nil {
		for _, o := range old {
			o.unmarkDeleted()
		}
		l.mu.Unlock()
		return err
	}
	l.segs = []*segment{s}
	l.leo.Store(offset)
	l.logStart.Store(offset)
	l.hw.Store(offset)
	l.recoveryPoint.Store(offset)
	l.size.Store(0)
	l.dirtyBytes.Store(0)
	l.mu.Unlock()
	for _, o := range old {
		l.m.scheduleDelete(o, 0)
	}
	l.prod = newProducerStates()
	removeSnapshots(l.fs, l.dir, math.MaxInt64, -1)
	if err := l.epochs.clear(); err != nil {
		return err
	}
	return l.fs.SyncDir(l.dir)
}
