package engine

import (
	"errors"
	"fmt"
	"os"
)

// Slice is a run of whole batches in one segment file, for sendfile. The
// segment stays pinned (its file open, its bytes in place) until Release.
// A Slice must not be copied after Read returns it: Release it once.
//
// File is the operating-system file under the engine's vfs.File: what is
// read or sent through it bypasses the engine's FS (and so its fault
// injection); ReadCopy reads through the FS.
type Slice struct {
	File *os.File
	Pos  int64
	Size int32
	seg  *segment
}

// Release unpins the segment. It is idempotent.
func (s *Slice) Release() {
	if s.seg != nil {
		seg := s.seg
		s.seg = nil
		seg.release()
	}
}

// Read returns the batches from the one holding offset, each with a last
// offset below upTo, within maxBytes — but at least one whole batch when
// minOne — all from one segment. The result has Size 0 (and pins nothing)
// when offset is upTo or the log end, or no whole batch fits.
// ErrOffsetOutOfRange: offset below the log start or above the log end.
func (l *Log) Read(offset int64, maxBytes int32, upTo int64, minOne bool) (Slice, error) {
	for {
		seg, last, err := l.pinSegment(offset, upTo)
		if err != nil || seg == nil {
			return Slice{}, err
		}
		start, size, found, err := seg.findRange(offset, int64(maxBytes), upTo, minOne, l.cfg.Load())
		if err != nil {
			err = l.readFailed(seg, err)
			seg.release()
			return Slice{}, err
		}
		if !found && !last {
			// offset lies in a gap after the segment's last batch.
			next := seg.base
			seg.release()
			nb, ok := l.nextSegmentBase(next)
			if !ok || nb <= offset {
				return Slice{}, nil
			}
			offset = nb
			continue
		}
		if size > 0 && l.dmg.count.Load() != 0 {
			if size, err = l.clipDamage(seg, start, size); err != nil {
				seg.release()
				return Slice{}, err
			}
		}
		if size == 0 {
			seg.release()
			return Slice{}, nil
		}
		return Slice{File: seg.osf, Pos: start, Size: int32(size), seg: seg}, nil
	}
}

// ReadCopy is Read into dst (appended); for TLS connections and tests.
func (l *Log) ReadCopy(offset int64, maxBytes int32, upTo int64, minOne bool, dst []byte) ([]byte, error) {
	s, err := l.Read(offset, maxBytes, upTo, minOne)
	if err != nil || s.Size == 0 {
		return dst, err
	}
	defer s.Release()
	n := len(dst)
	if cap(dst)-n < int(s.Size) {
		nd := make([]byte, n, n+int(s.Size))
		copy(nd, dst)
		dst = nd
	}
	dst = dst[:n+int(s.Size)]
	if _, err := s.seg.log.ReadAt(dst[n:], s.Pos); err != nil {
		l.m.reportIO(l.tp.String(), err, "op", "read", "segment", s.seg.base, "position", s.Pos)
		return dst[:n], ioFailure(fmt.Sprintf("read %s", l.tp), err)
	}
	return dst, nil
}

// pinSegment checks offset and pins the segment that holds it; nil when there
// is nothing to read.
func (l *Log) pinSegment(offset, upTo int64) (*segment, bool, error) {
	leo := l.leo.Load()
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, false, ErrClosed
	}
	if ls := l.logStart.Load(); offset < ls || offset > leo {
		return nil, false, fmt.Errorf("%w: %d not in [%d, %d] of %s", ErrOffsetOutOfRange, offset, ls, leo, l.tp)
	}
	if offset == leo || offset >= upTo {
		return nil, false, nil
	}
	i := l.segmentForLocked(offset)
	s := l.segs[i]
	s.pin()
	return s, i == len(l.segs)-1, nil
}

// OnOlderSegment reports whether offset lies in a segment before the one
// that holds end (a fetch's bound: the high watermark, the last stable
// offset or the log end; the log end is in the last segment). A fetch
// whose offset is on an older segment answers at once, whatever its
// MinBytes (Kafka's DelayedFetch): the read stops at the segment's end,
// which may hold fewer bytes than MinBytes (a compacted segment) however
// much lies beyond it.
func (l *Log) OnOlderSegment(offset, end int64) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if offset >= end || len(l.segs) < 2 {
		return false
	}
	return l.segmentForLocked(offset) < l.segmentForLocked(end)
}

func (l *Log) nextSegmentBase(base int64) (int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs {
		if s.base > base {
			return s.base, true
		}
	}
	return 0, false
}

// findRange finds, in a pinned segment, the first batch with last offset >=
// offset and the run of whole batches from it that ends below upTo and fits
// maxBytes (at least one if minOne). found is false when no batch of the
// segment reaches offset.
func (s *segment) findRange(offset, maxBytes, upTo int64, minOne bool, cfg *LogConfig) (start, size int64, found bool, err error) {
	limit := s.size.Load()
	if start, size, ok := s.tailRange(offset, maxBytes, upTo, minOne, limit); ok {
		return start, size, true, nil
	}
	return s.scanRange(offset, maxBytes, upTo, minOne, limit, cfg)
}

// scanRange is findRange by the index and the batch headers in the file, the size
// read being limit.
func (s *segment) scanRange(offset, maxBytes, upTo int64, minOne bool, limit int64, cfg *LogConfig) (start, size int64, found bool, err error) {
	sc := getScanner(s.log, limit)
	defer putScanner(sc)
	pos := s.lookupPos(offset, sc, cfg)
	next := s.base
	for {
		if pos >= sc.limit {
			return 0, 0, false, nil
		}
		h, err := sc.header(pos)
		if err != nil {
			return 0, 0, false, &batchAtError{seg: s.base, pos: pos, next: next, err: err}
		}
		if h.LastOffset() >= offset {
			break
		}
		next = h.LastOffset() + 1
		pos += h.Size()
	}
	start = pos
	// Skip, through the index, the batches that certainly fit.
	if maxBytes > 2*scanBufSize {
		s.idxMu.RLock()
		var (
			o, p int64
			ok   bool
		)
		if s.oidx != nil {
			o, p, ok = s.oidx.lookupBound(start+maxBytes, upTo)
		}
		s.idxMu.RUnlock()
		if ok && p > start {
			if h, err := sc.header(p); err == nil && h.LastOffset() == o {
				size, pos = p-start, p
			} else {
				s.idxBad.Store(true)
			}
		}
	}
	for pos < sc.limit {
		h, err := sc.header(pos)
		if err != nil {
			if size > 0 {
				break
			}
			return 0, 0, true, &batchAtError{seg: s.base, pos: pos, next: next, err: err}
		}
		next = h.LastOffset() + 1
		if h.LastOffset() >= upTo {
			break
		}
		if size+h.Size() > maxBytes && !(size == 0 && minOne) {
			break
		}
		size += h.Size()
		pos += h.Size()
		if size >= maxBytes {
			break
		}
	}
	return start, size, true, nil
}

// OffsetForTimestamp returns the offset and timestamp of the first record
// with timestamp >= ts (ListOffsets). In a compressed batch it answers the
// batch's base offset and max timestamp. ok is false when no record is that
// late.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error) {
	segs := l.pinAll()
	defer releaseAll(segs)
	cfg := l.cfg.Load()
	logStart := l.logStart.Load()
	for _, s := range segs {
		if s.size.Load() == 0 {
			continue
		}
		if err := s.ensureIndexes(cfg); err != nil {
			return 0, 0, false, err
		}
		if s.maxTs.Load() < ts {
			continue
		}
		sc := getScanner(s.log, s.size.Load())
		var pos int64
		s.idxMu.RLock()
		from, hit := s.tidx.lookupBelow(ts)
		s.idxMu.RUnlock()
		if hit {
			pos = s.lookupPos(from, sc, cfg)
		}
		for pos < sc.limit {
			h, herr := sc.header(pos)
			if herr != nil {
				if !errors.Is(herr, ErrCorrupt) {
					putScanner(sc)
					l.m.reportIO(l.tp.String(), herr, "op", "read", "segment", s.base)
					return 0, 0, false, ioFailure(fmt.Sprintf("offset for timestamp %s", l.tp), herr)
				}
				break // damaged: the rest of the segment is unreadable
			}
			// A batch compaction emptied holds no record to answer with.
			if h.MaxTimestamp >= ts && h.LastOffset() >= logStart && h.NumRecords > 0 {
				putScanner(sc)
				return l.offsetInBatch(s, pos, &h, ts, logStart)
			}
			pos += h.Size()
		}
		putScanner(sc)
	}
	return 0, 0, false, nil
}

// offsetInBatch decodes an uncompressed batch to find the first record with
// timestamp >= ts.
func (l *Log) offsetInBatch(s *segment, pos int64, h *BatchHeader, ts, logStart int64) (int64, int64, bool, error) {
	base := h.BaseOffset
	if base < logStart {
		base = logStart
	}
	if h.Compression() != 0 || h.LogAppendTimeType() || h.Size() > 64<<20 {
		return base, h.MaxTimestamp, true, nil
	}
	b := make([]byte, h.Size())
	if _, err := s.log.ReadAt(b, pos); err != nil {
		l.m.reportIO(l.tp.String(), err, "op", "read", "segment", s.base)
		return 0, 0, false, ioFailure(fmt.Sprintf("offset for timestamp %s", l.tp), err)
	}
	off, t, found := base, h.MaxTimestamp, false
	err := recordTimestamps(b, func(o, rts int64) bool {
		if rts >= ts && o >= logStart {
			off, t, found = o, rts, true
			return false
		}
		return true
	})
	if err != nil || !found {
		return base, h.MaxTimestamp, true, nil
	}
	return off, t, true, nil
}

// batchAtError is a batch header that could not be read or parsed.
type batchAtError struct {
	seg, pos int64
	next     int64 // offset after the last batch read before it (the segment base if none)
	err      error
}

func (e *batchAtError) Error() string {
	return fmt.Sprintf("segment %d at %d: %v", e.seg, e.pos, e.err)
}
func (e *batchAtError) Unwrap() error { return e.err }

// readFailed accounts for a read that failed and returns the error to give:
// an I/O error is reported and wrapped in ErrIO; a batch whose framing is
// broken is recorded as damage once it is checked, under appendMu, to be
// still there (a concurrent truncation is no damage).
func (l *Log) readFailed(seg *segment, err error) error {
	var be *batchAtError
	if !errors.Is(err, ErrCorrupt) {
		l.m.reportIO(l.tp.String(), err, "op", "read", "segment", seg.base)
		return ioFailure(fmt.Sprintf("read %s", l.tp), err)
	}
	if !errors.As(err, &be) || l.damageKnown(seg.base, be.pos) {
		return err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if !l.hasSegment(seg) {
		return err
	}
	size := seg.size.Load()
	if be.pos >= size {
		return err
	}
	sc := getScanner(seg.log, size)
	_, herr := sc.header(be.pos)
	putScanner(sc)
	if herr == nil || !errors.Is(herr, ErrCorrupt) {
		return err
	}
	end := l.leo.Load()
	if nb, ok := l.nextSegmentBase(seg.base); ok {
		end = nb
	}
	l.recordDamage(Damage{Segment: seg.base, Pos: be.pos, Size: size - be.pos,
		FirstOffset: be.next, LastOffset: max(end-1, be.next), FoundBy: foundByRead, Err: herr})
	return err
}

// hasSegment reports whether s is in the log's list.
func (l *Log) hasSegment(s *segment) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, o := range l.segs {
		if o == s {
			return true
		}
	}
	return false
}
