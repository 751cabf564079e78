package engine

import (
	"encoding/binary"
	"math"
)

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
// Like the offset index it tries the warm tail first.
func (x *timeIndex) lookupBelow(ts int64) (offset int64, ok bool) {
	n := x.entries
	if n == 0 || ts == math.MinInt64 {
		return 0, false
	}
	t := ts - 1
	i := -1
	if warm := n - warmBytes/timeEntrySize; warm > 0 && x.tsAt(warm) <= t {
		i = x.searchLocked(t, warm)
	} else {
		i = x.searchLocked(t, 0)
	}
	if i < 0 {
		return 0, false
	}
	return x.base + int64(x.relAt(i)), true
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
	n := x.entries
	for n > 0 && x.base+int64(x.relAt(n-1)) >= target {
		n--
	}
	x.setEntriesLocked(n)
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
