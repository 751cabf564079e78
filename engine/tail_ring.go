package engine

// The batches last appended to a segment, remembered for tail reads. A consumer or
// follower at the end of a log fetches from the batch after the last one it read,
// nearly always among the last few appended. Finding it through the sparse index
// cost a read of the header at the index entry (to check it) and of every header
// after it (one pread each, up to IndexIntervalBytes apart), then more to size the
// range: at omb-1topic-100p-1kb 5% of the broker's CPU samples were those preads.
// The appender records each batch's offsets and place in the file (under idxMu, as
// it adds index entries); findRange answers from them when the batch the read
// starts at is one of them, with no read of the file.

// tailSlots is how many batches a segment remembers.
const tailSlots = 16

// tailBatch is one batch's offsets and place in the segment file.
type tailBatch struct{ base, last, pos, size int64 }

// tailRing holds a segment's last tailSlots batches, consecutive in the file.
type tailRing struct {
	b [tailSlots]tailBatch
	n int // batches recorded; the last min(n, tailSlots) are in b
}

// recordTailLocked remembers a batch appended at pos. The caller holds idxMu
// (write).
func (s *segment) recordTailLocked(h BatchHeader, pos int64) {
	if s.tail == nil {
		s.tail = new(tailRing)
	}
	t := s.tail
	t.b[t.n%tailSlots] = tailBatch{base: h.BaseOffset, last: h.LastOffset(), pos: pos, size: h.Size()}
	t.n++
}

// forgetTailLocked drops what the segment remembers (a truncation, a roll). The
// caller holds idxMu (write).
func (s *segment) forgetTailLocked() { s.tail = nil }

// tailRange is findRange answered from the remembered batches: the range that
// starts at the first batch whose last offset is at least offset and holds what
// findRange's scan would take (batches below upTo, within maxBytes but at least
// one with minOne, none past limit, the size the reader saw). ok is false when
// that batch is not among them (or is past limit): the caller scans the file.
func (s *segment) tailRange(offset, maxBytes, upTo int64, minOne bool, limit int64) (start, size int64, ok bool) {
	s.idxMu.RLock()
	defer s.idxMu.RUnlock()
	t := s.tail
	if t == nil || t.n == 0 {
		return 0, 0, false
	}
	first := max(0, t.n-tailSlots)
	i := first
	for i < t.n && t.b[i%tailSlots].last < offset {
		i++
	}
	// The oldest remembered batch answers only if it holds offset: a batch
	// before it, not remembered, might end at or past offset otherwise.
	if i == t.n || i == first && t.b[i%tailSlots].base > offset {
		return 0, 0, false
	}
	b := t.b[i%tailSlots]
	if b.pos+b.size > limit {
		return 0, 0, false
	}
	start = b.pos
	for ; i < t.n; i++ {
		b := t.b[i%tailSlots]
		if b.pos+b.size > limit || b.last >= upTo {
			break
		}
		if size+b.size > maxBytes && !(size == 0 && minOne) {
			break
		}
		size += b.size
		if size >= maxBytes {
			break
		}
	}
	return start, size, true
}
