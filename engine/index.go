package engine

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/edsrzf/mmap-go"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// mmapIndex is a file of fixed-size entries mapped into memory: the common
// part of the offset index and the time index.
//
// Invariants (the caller holds segment.idxMu: shared for reads, exclusive for
// every other method):
//  1. entries*entrySize <= len(mm); entries past that are garbage.
//  2. A writable index is preallocated and mapped read-write at its maximum
//     size; a read-only one is mapped at exactly its file size (nil if empty).
//  3. No slice of mm outlives the lock: readers copy values out.
type mmapIndex struct {
	path       string
	f          vfs.File
	mm         mmap.MMap
	entrySize  int
	entries    int
	maxEntries int
	writable   bool

	// sum holds the key of every sumEvery-th entry (sum[j] = key(j*sumEvery)):
	// a small, cache-resident first level for the binary search, so a lookup
	// in a 10 MiB index touches a handful of its cache lines. When sumOK,
	// len(sum) == ceil(entries/sumEvery); otherwise searches go without it.
	sum   []int64
	sumOK bool
}

const sumEvery = 64

// key is the search key of entry i: the relative offset of an offset-index
// entry, the timestamp of a time-index entry.
func (x *mmapIndex) key(i int) int64 {
	if x.entrySize == offsetEntrySize {
		return int64(binary.BigEndian.Uint32(x.mm[i*offsetEntrySize:]))
	}
	return int64(binary.BigEndian.Uint64(x.mm[i*timeEntrySize:]))
}

// rebuildSumLocked recomputes the summary from the entries.
func (x *mmapIndex) rebuildSumLocked() {
	x.sum = x.sum[:0]
	for i := 0; i < x.entries; i += sumEvery {
		x.sum = append(x.sum, x.key(i))
	}
	x.sumOK = true
}

// setEntriesLocked drops entries from n on (n <= entries).
func (x *mmapIndex) setEntriesLocked(n int) {
	x.entries = n
	if x.sumOK {
		x.sum = x.sum[:(n+sumEvery-1)/sumEvery]
	}
}

// searchLocked returns the largest i in [from, entries) with key(i) <= t,
// or -1 when key(from) > t. With from == 0 it goes through the summary.
func (x *mmapIndex) searchLocked(t int64, from int) int {
	n := x.entries
	if from >= n || x.key(from) > t {
		return -1
	}
	lo, hi := from, n-1
	if from == 0 && x.sumOK && len(x.sum) > 1 {
		s := x.sum
		a, b := 0, len(s)-1
		for a < b {
			mid := int(uint(a+b+1) >> 1)
			if s[mid] <= t {
				a = mid
			} else {
				b = mid - 1
			}
		}
		lo, hi = a*sumEvery, min(a*sumEvery+sumEvery-1, n-1)
	}
	// Invariant: key(lo) <= t; the answer is in [lo, hi].
	for lo < hi {
		mid := int(uint(lo+hi+1) >> 1)
		if x.key(mid) <= t {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// openIndex opens (creating it if missing) the index at path. The entry count
// is the file size in whole entries; the caller checks or rebuilds it. A
// writable index is preallocated to maxBytes. sound is false when the file was
// missing or not a whole number of entries.
func openIndex(fsys vfs.FS, path string, entrySize int, maxBytes int32, writable bool) (x *mmapIndex, sound bool, err error) {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, err
	}
	x = &mmapIndex{path: path, f: f, entrySize: entrySize}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, false, err
	}
	// A file created just now has mode 0644 and size 0; one that existed
	// empty is sound too, so tell them apart by the creation below.
	sound = fi.Size()%int64(entrySize) == 0
	x.entries = int(fi.Size() / int64(entrySize))
	if writable {
		err = x.mapWritableLocked(maxBytes)
	} else {
		err = x.mapReadOnlyLocked()
	}
	if err != nil {
		f.Close()
		return nil, false, err
	}
	// The summary is built by the caller once the entries are checked
	// (rebuildSumLocked): an unchecked file may be 10 MiB of preallocated
	// zeros, not worth faulting in.
	return x, sound, nil
}

func (x *mmapIndex) unmapLocked() error {
	if x.mm == nil {
		return nil
	}
	err := x.mm.Unmap()
	x.mm = nil
	return err
}

// emptyLocked makes the index empty and unmapped after a failure to map or
// write it: an empty index is always right (lookups then scan from the
// segment's start, and appends skip it) until it is rebuilt.
func (x *mmapIndex) emptyLocked() {
	x.unmapLocked()
	x.entries, x.maxEntries, x.writable = 0, 0, false
	x.sum, x.sumOK = x.sum[:0], true
}

// mapWritableLocked preallocates the file to maxBytes (rounded down to whole
// entries, never below the current entries) and maps it read-write. On
// failure the index is left empty (emptyLocked).
func (x *mmapIndex) mapWritableLocked(maxBytes int32) error {
	err := x.mapWritable(maxBytes)
	if err != nil {
		x.emptyLocked()
	}
	return err
}

func (x *mmapIndex) mapWritable(maxBytes int32) error {
	if err := x.unmapLocked(); err != nil {
		return err
	}
	maxEntries := int(maxBytes) / x.entrySize
	if maxEntries < x.entries {
		maxEntries = x.entries
	}
	if maxEntries < 1 {
		maxEntries = 1
	}
	size := int64(maxEntries * x.entrySize)
	if err := preallocate(x.f, size); err != nil {
		return err
	}
	fi, err := x.f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() > size {
		if err := x.f.Truncate(size); err != nil {
			return err
		}
	}
	mm, err := mapFile(x.f, int(size), mmap.RDWR)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", x.path, err)
	}
	x.mm = mm
	x.maxEntries = maxEntries
	x.writable = true
	return nil
}

// mapReadOnlyLocked truncates the file to its entries and maps it read-only.
// On failure the index is left empty (emptyLocked).
func (x *mmapIndex) mapReadOnlyLocked() error {
	err := x.mapReadOnly()
	if err != nil {
		x.emptyLocked()
	}
	return err
}

func (x *mmapIndex) mapReadOnly() error {
	if err := x.unmapLocked(); err != nil {
		return err
	}
	size := int64(x.entries * x.entrySize)
	fi, err := x.f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != size {
		if err := x.f.Truncate(size); err != nil {
			return err
		}
	}
	x.writable = false
	x.maxEntries = x.entries
	if size == 0 {
		return nil
	}
	mm, err := mapFile(x.f, int(size), mmap.RDONLY)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", x.path, err)
	}
	x.mm = mm
	return nil
}

// full reports whether n more entries would not fit.
func (x *mmapIndex) fullFor(n int) bool { return x.writable && x.entries+n > x.maxEntries }

// appendLocked copies e (one entry) after the last entry. The index must be
// writable and not full.
func (x *mmapIndex) appendLocked(e []byte) bool {
	if !x.writable || x.entries >= x.maxEntries {
		return false
	}
	copy(x.mm[x.entries*x.entrySize:], e)
	if x.sumOK && x.entries%sumEvery == 0 {
		x.sum = append(x.sum, x.key(x.entries))
	}
	x.entries++
	return true
}

// rewriteLocked replaces the content with data (whole entries) and maps it
// again, writable (at maxBytes) or read-only.
func (x *mmapIndex) rewriteLocked(data []byte, writable bool, maxBytes int32) error {
	if err := x.unmapLocked(); err != nil {
		return err
	}
	// No truncation first: the mapping below trims or preallocates, and
	// bytes past the entries are never read.
	if len(data) > 0 {
		if _, err := x.f.WriteAt(data, 0); err != nil {
			x.emptyLocked()
			return err
		}
	}
	x.entries = len(data) / x.entrySize
	var err error
	if writable {
		err = x.mapWritableLocked(maxBytes)
	} else {
		err = x.mapReadOnlyLocked()
	}
	x.rebuildSumLocked()
	return err
}

// syncLocked makes the entries durable.
func (x *mmapIndex) syncLocked() error {
	if x.mm != nil && x.writable {
		if err := x.mm.Flush(); err != nil {
			return err
		}
	}
	return x.f.Sync()
}

// closeLocked trims a writable index to its entries, unmaps and closes.
func (x *mmapIndex) closeLocked() error {
	var err error
	if x.writable {
		err = x.mapReadOnlyLocked()
	}
	if e := x.unmapLocked(); err == nil {
		err = e
	}
	if e := x.f.Close(); err == nil {
		err = e
	}
	return err
}

// warmEntries is the size of the recently-used tail searched first: 8 KiB, as
// in Kafka, so the hot pages stay in the page cache and the TLB.
const warmBytes = 8192

// mapFile maps the first size bytes of f, which must be backed by an
// operating-system file (every vfs.FS of this tree is).
func mapFile(f vfs.File, size int, prot int) (mmap.MMap, error) {
	osf := vfs.OSFile(f)
	if osf == nil {
		return nil, fmt.Errorf("%w: %s is not an operating-system file; it cannot be mapped", ErrInvalidConfig, f.Name())
	}
	return mmap.MapRegion(osf, size, prot, 0, 0)
}
