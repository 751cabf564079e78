package engine

import "encoding/binary"

const offsetEntrySize = 8

// offsetIndex maps the last offset of a batch (relative to the segment's base
// offset) to the file position of the batch. Entries increase strictly in
// both fields. Locking as for mmapIndex.
type offsetIndex struct {
	mmapIndex
	base int64
}

func (x *offsetIndex) relAt(i int) uint32 { return binary.BigEndian.Uint32(x.mm[i*offsetEntrySize:]) }
func (x *offsetIndex) posAt(i int) uint32 { return binary.BigEndian.Uint32(x.mm[i*offsetEntrySize+4:]) }

// appendEntryLocked adds (offset, pos) unless it would not increase (an
// index rebuilt concurrently may already hold it). The caller checked
// capacity.
func (x *offsetIndex) appendEntryLocked(offset int64, pos int64) bool {
	if n := x.entries; n > 0 && (x.base+int64(x.relAt(n-1)) >= offset || int64(x.posAt(n-1)) >= pos) {
		return false
	}
	var e [offsetEntrySize]byte
	binary.BigEndian.PutUint32(e[0:], uint32(offset-x.base))
	binary.BigEndian.PutUint32(e[4:], uint32(pos))
	return x.appendLocked(e[:])
}

// lookup returns the largest entry whose offset is <= target: its absolute
// offset and position, or ok=false when target is below the first entry. The
// search tries the warm tail (the last 8 KiB, where consumers near the end
// land) first, then the summary and the rest.
func (x *offsetIndex) lookup(target int64) (offset, pos int64, ok bool) {
	n := x.entries
	if n == 0 || target < x.base {
		return 0, 0, false
	}
	t := min(target-x.base, 0xFFFFFFFF)
	i := -1
	if warm := n - warmBytes/offsetEntrySize; warm > 0 && int64(x.relAt(warm)) <= t {
		i = x.searchLocked(t, warm)
	} else {
		i = x.searchLocked(t, 0)
	}
	if i < 0 {
		return 0, 0, false
	}
	return x.base + int64(x.relAt(i)), int64(x.posAt(i)), true
}

// lastEntry returns the last entry, if any.
func (x *offsetIndex) lastEntry() (offset, pos int64, ok bool) {
	if x.entries == 0 {
		return 0, 0, false
	}
	i := x.entries - 1
	return x.base + int64(x.relAt(i)), int64(x.posAt(i)), true
}

// truncateToLocked drops entries with offset >= target.
func (x *offsetIndex) truncateToLocked(target int64) {
	n := x.entries
	for n > 0 && x.base+int64(x.relAt(n-1)) >= target {
		n--
	}
	x.setEntriesLocked(n)
}

// checkLocked verifies that entries increase strictly, lie within the
// segment's offset range [base, end) and point inside a log of logSize bytes.
func (x *offsetIndex) checkLocked(end, logSize int64) bool {
	var prevRel, prevPos uint32
	for i := 0; i < x.entries; i++ {
		rel, pos := x.relAt(i), x.posAt(i)
		if i > 0 && (rel <= prevRel || pos <= prevPos) {
			return false
		}
		if x.base+int64(rel) >= end || int64(pos) >= logSize {
			return false
		}
		prevRel, prevPos = rel, pos
	}
	return true
}

func putOffsetEntry(e []byte, rel, pos uint32) {
	binary.BigEndian.PutUint32(e[0:], rel)
	binary.BigEndian.PutUint32(e[4:], pos)
}

// lookupBound returns the last entry whose position is <= maxPos and whose
// offset is < upTo: every batch before that position ends within maxPos and
// below upTo, so a reader may skip to it.
func (x *offsetIndex) lookupBound(maxPos, upTo int64) (offset, pos int64, ok bool) {
	n := x.entries
	ok0 := func(i int) bool {
		return int64(x.posAt(i)) <= maxPos && x.base+int64(x.relAt(i)) < upTo
	}
	if n == 0 || !ok0(0) {
		return 0, 0, false
	}
	lo, hi := 0, n-1
	for lo < hi {
		mid := int(uint(lo+hi+1) >> 1)
		if ok0(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return x.base + int64(x.relAt(lo)), int64(x.posAt(lo)), true
}
