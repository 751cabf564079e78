package engine

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"sync/atomic"
)

// Damage is a range of a segment file found damaged: a batch whose CRC or
// content is wrong, or, where the framing itself is broken, everything from
// there to the end of the segment file as it was then.
type Damage struct {
	TP          TopicPartition
	Segment     int64 // base offset of the segment
	Pos, Size   int64 // byte range in the segment file
	FirstOffset int64 // first offset that may be damaged
	LastOffset  int64 // last offset that may be damaged (the segment's last, for broken framing)
	FoundBy     string
	Err         error
}

func (d Damage) String() string {
	return fmt.Sprintf("%s offsets %d..%d (segment %d, bytes %d+%d, found by %s): %v",
		d.TP, d.FirstOffset, d.LastOffset, d.Segment, d.Pos, d.Size, d.FoundBy, d.Err)
}

// Who found a damage.
const (
	foundByOpen  = "open"
	foundByScrub = "scrub"
	foundByRead  = "read"
)

// maxDamages bounds what one log records; past it the earliest are kept.
const maxDamages = 64

// damages is a log's damage registry. count mirrors len(list) so that the
// read path checks it with one atomic load.
type damages struct {
	count atomic.Int32
	list  []Damage // sorted by (Segment, Pos); under Log.mu
}

// Damage returns the damage recorded in the log, oldest offsets first.
func (l *Log) Damage() []Damage {
	if l.dmg.count.Load() == 0 {
		return nil
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]Damage(nil), l.dmg.list...)
}

// FirstDamagedOffset is the first offset of the log recorded as damaged.
// Replication may truncate a follower to it and fetch again; a leader with
// damage should give up leadership.
func (l *Log) FirstDamagedOffset() (int64, bool) {
	ds := l.Damage()
	if len(ds) == 0 {
		return 0, false
	}
	first := ds[0].FirstOffset
	for _, d := range ds[1:] {
		first = min(first, d.FirstOffset)
	}
	return first, true
}

// Damaged returns every log's recorded damage.
func (m *Manager) Damaged() []Damage {
	var out []Damage
	for _, l := range m.Logs() {
		out = append(out, l.Damage()...)
	}
	return out
}

// recordDamage adds d unless the range is already known, and reports a new
// finding once. The caller holds appendMu (so the segment is not being cut)
// and has checked that the segment is still in the log.
func (l *Log) recordDamage(d Damage) {
	d.TP = l.tp
	l.mu.Lock()
	for _, o := range l.dmg.list {
		if o.Segment == d.Segment && o.Pos <= d.Pos && d.Pos < o.Pos+o.Size {
			l.mu.Unlock()
			return
		}
	}
	if len(l.dmg.list) >= maxDamages {
		l.mu.Unlock()
		return
	}
	l.dmg.list = append(l.dmg.list, d)
	sort.Slice(l.dmg.list, func(i, j int) bool {
		a, b := l.dmg.list[i], l.dmg.list[j]
		return a.Segment < b.Segment || a.Segment == b.Segment && a.Pos < b.Pos
	})
	l.dmg.count.Store(int32(len(l.dmg.list)))
	l.mu.Unlock()
	// Every finding is logged (once: a known range is not recorded again, and
	// a log records at most maxDamages), outside the failure rate limit.
	l.m.fail.counts[failCorrupt].Add(1)
	l.m.logger.Error("damaged data found", "tp", l.tp.String(), "first_offset", d.FirstOffset,
		"last_offset", d.LastOffset, "segment", d.Segment, "position", d.Pos, "size", d.Size,
		"found_by", d.FoundBy, "err", d.Err)
}

// damageKnown reports whether a recorded damage covers pos in segment base
// (a reader that meets it again need not check it again).
func (l *Log) damageKnown(base, pos int64) bool {
	if l.dmg.count.Load() == 0 {
		return false
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, d := range l.dmg.list {
		if d.Segment == base && d.Pos <= pos && pos < d.Pos+d.Size {
			return true
		}
	}
	return false
}

// pruneDamageLocked drops the damage of segments no longer in the log, and
// the parts cut off by a truncation. The caller holds Log.mu exclusively.
func (l *Log) pruneDamageLocked() {
	if len(l.dmg.list) == 0 {
		return
	}
	live := make(map[int64]int64, len(l.segs))
	for _, s := range l.segs {
		live[s.base] = s.size.Load()
	}
	kept := l.dmg.list[:0]
	for _, d := range l.dmg.list {
		if size, ok := live[d.Segment]; ok && d.Pos < size {
			kept = append(kept, d)
		}
	}
	clear(l.dmg.list[len(kept):])
	l.dmg.list = kept
	l.dmg.count.Store(int32(len(kept)))
}

func (l *Log) pruneDamage() {
	if l.dmg.count.Load() == 0 {
		return
	}
	l.mu.Lock()
	l.pruneDamageLocked()
	l.mu.Unlock()
}

// clipDamage shortens a read of [start, start+size) in seg so that it ends
// before the first damaged range it reaches; a read that starts in damage is
// ErrCorrupt.
func (l *Log) clipDamage(seg *segment, start, size int64) (int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, d := range l.dmg.list {
		if d.Segment != seg.base || d.Pos+d.Size <= start || d.Pos >= start+size {
			continue
		}
		if d.Pos <= start {
			return 0, fmt.Errorf("%w: %s offsets %d..%d are damaged (segment %d at %d): %w",
				ErrCorruptBatch, l.tp, d.FirstOffset, d.LastOffset, d.Segment, d.Pos, d.Err)
		}
		return d.Pos - start, nil
	}
	return size, nil
}

// verifyResult is what verifyBatches found.
type verifyResult struct {
	end     int64 // position after the last batch checked
	next    int64 // offset after the last good batch
	checked int64 // bytes checked
	damage  []Damage
	broken  bool // the framing broke: nothing after damage[len-1].Pos was checked
}

// verifyBatches checks every batch of s from pos (a batch boundary) to limit:
// framing, increasing offsets below end, CRC and record framing. A batch
// with a bad CRC or content is recorded and skipped; broken framing ends the
// walk with a damage up to limit. pace, when set, is called with the bytes
// of each batch before it is read (rate limiting, cancellation); its error
// ends the walk. An I/O error is returned as is.
func verifyBatches(s *segment, pos, limit, next, end int64, buf []byte, pace func(int64) error) (verifyResult, error) {
	w := &window{f: s.log, buf: buf, limit: limit}
	r := verifyResult{end: pos, next: next}
	lastOff := func() int64 {
		if end > r.next {
			return end - 1
		}
		return r.next
	}
	// untrusted is the index in r.damage of the batch just before, whose CRC failed:
	// the CRC covers its lastOffsetDelta, so its offsets are not to be believed. The
	// next batch may start anywhere from r.next, and its base bounds that damage.
	untrusted := -1
	for pos < limit {
		hb, err := w.at(pos, BatchHeaderSize)
		var h BatchHeader
		var order error
		if err == nil {
			h, err = ParseBatchHeader(hb)
			switch {
			case err != nil:
				err = storedBatchError(err)
			case pos+h.Size() > limit:
				err = errTruncated
			case h.BaseOffset < r.next || h.LastOffsetDelta < 0 || h.LastOffset() >= end ||
				h.LastOffset()-s.base > 1<<31-1:
				order = fmt.Errorf("%w: batch offsets %d..%d out of order (expected from %d, below %d)",
					ErrCorruptBatch, h.BaseOffset, h.LastOffset(), r.next, end)
			}
		} else if errors.Is(err, io.ErrUnexpectedEOF) {
			err = errTruncated
		} else {
			return r, err
		}
		intact := false
		if err == nil {
			if pace != nil {
				if err := pace(h.Size()); err != nil {
					return r, err
				}
			}
			var ierr error
			if intact, ierr = batchIntact(w, pos, &h); ierr != nil {
				return r, ierr
			}
			// Offsets out of order in a batch whose CRC holds: the framing broke
			// (a batch from elsewhere, or a flipped base offset, which the CRC does
			// not cover). In one whose CRC fails they are part of the damage.
			if intact && order != nil {
				err = order
			}
		}
		if err != nil {
			r.damage = append(r.damage, Damage{Segment: s.base, Pos: pos, Size: limit - pos,
				FirstOffset: r.next, LastOffset: lastOff(), Err: err})
			r.broken = true
			r.end = limit
			return r, nil
		}
		r.checked += h.Size()
		if !intact {
			last := h.LastOffset()
			if order != nil || last < r.next {
				last = lastOff()
			}
			r.damage = append(r.damage, Damage{Segment: s.base, Pos: pos, Size: h.Size(),
				FirstOffset: r.next, LastOffset: last,
				Err: fmt.Errorf("%w: batch %d..%d fails its CRC or record framing", ErrCorruptBatch, h.BaseOffset, h.LastOffset())})
			untrusted = len(r.damage) - 1
		} else {
			if untrusted >= 0 && h.BaseOffset > r.damage[untrusted].FirstOffset {
				r.damage[untrusted].LastOffset = h.BaseOffset - 1
			}
			untrusted = -1
			r.next = h.LastOffset() + 1
		}
		pos += h.Size()
		r.end = pos
	}
	return r, nil
}
