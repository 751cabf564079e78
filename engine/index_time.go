package engine

import "encoding/binary"

const timeEntrySize = 12

// timeIndex maps the largest timestamp seen so far in the segment to the last
// offset of the batch that carried it. Timestamps and offsets increase
// strictly. Locking as for mmapIndex.
type timeIndex struct {
	mmapIndex
	base int64
}

func (x *timeIndex) tsAt(i int) int64 { return int64(binary.BigEndian.Uint64(x.mm[i*timeEntrySize:])) }
func (x *timeIndex) relAt(i int) uint32 {
	return binary.BigEndian.Uint32(x.mm[i*timeEntrySize+8:])
}

// maybeAppendLocked adds (ts, offset) if ts is above the last entry's
// timestamp and offset above its offset (or if the index is empty).
func (x *timeIndex) maybeAppendLocked(ts, offset int64) {
	if x.entries > 0 {
		i := x.entries - 1
		if ts <= x.tsAt(i) || offset-x.base <= int64(x.relAt(i)) {
			return
		}
	}
	var e [timeEntrySize]byte
	binary.BigEndian.PutUint64(e[0:], uint64(ts))
	binary.BigEndian.PutUint32(e[8:], uint32(offset-x.base))
	x.appendLocked(e[:])
}

// lookupBelow returns the last entry whose timestamp is < ts: every batch up
// to and including its offset has timestamps below ts, so a search for the
// first record at or after ts may start at the batch holding that offset.
func (x *timeIndex) lookupBelow(ts int64) (offset int64, ok bool) {
	n := x.entries
	if n == 0 || x.tsAt(0) >= ts {
		return 0, false
	}
	lo, hi := 0, n-1
	if warm := n - warmBytes/timeEntrySize; warm > 0 {
		if x.tsAt(warm) < ts {
			lo = warm
		} else {
			hi = warm - 1
		}
	}
	for lo < hi {
		mid := int(uint(lo+hi+1) >> 1)
		if x.tsAt(mid) < ts {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return x.base + int64(x.relAt(lo)), true
}

// lastEntry returns the last entry, if any.
func (x *timeIndex) lastEntry() (ts, offset int64, ok bool) {
	if x.entries == 0 {
		return 0, 0, false
	}
	i := x.entries - 1
	return x.tsAt(i), x.base + int64(x.relAt(i)), true
}

// truncateToLocked drops entries with offset >= target.
func (x *timeIndex) truncateToLocked(target int64) {
	for x.entries > 0 && x.base+int64(x.relAt(x.entries-1)) >= target {
		x.entries--
	}
}

// checkLocked verifies that entries increase strictly and lie in [base, end).
func (x *timeIndex) checkLocked(end int64) bool {
	var prevTs int64
	var prevRel uint32
	for i := 0; i < x.entries; i++ {
		ts, rel := x.tsAt(i), x.relAt(i)
		if i > 0 && (ts <= prevTs || rel <= prevRel) {
			return false
		}
		if x.base+int64(rel) >= end {
			return false
		}
		prevTs, prevRel = ts, rel
	}
	return true
}

func putTimeEntry(e []byte, ts int64, rel uint32) {
	binary.BigEndian.PutUint64(e[0:], uint64(ts))
	binary.BigEndian.PutUint32(e[8:], rel)
}
