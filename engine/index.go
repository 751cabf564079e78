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
// It holds no file descriptor: the file is opened for the few operations
// that need one (mapping, growing, trimming, fsync) and closed again, so an
// index costs a mapping, not a descriptor (as Kafka's, which closes its
// RandomAccessFile once mapped). A partition's active segment then holds
// one descriptor, its .log.
//
// A writable index grows on demand: it starts with no space (an idle
// partition's indexes are no files at all, see lazy) and, when an append needs room, is
// fallocated to twice its size (at least indexGrowMin, at most maxEntries
// entries) and mapped again. The space is reserved by fallocate before the
// mapping reaches it, so a write through the mapping never meets a hole (a
// sparse page on a full disk would raise SIGBUS); a full disk fails the
// growth, before the append writes anything, with ENOSPC.
//
// Invariants (the caller holds segment.idxMu: shared for reads, exclusive for
// every other method):
//  1. entries <= capEntries <= maxEntries and capEntries*entrySize <= len(mm);
//     entries past `entries` are garbage.
//  2. A writable index is allocated and mapped read-write at capEntries; a
//     read-only one is mapped at exactly its file size (nil if empty), with
//     capEntries = maxEntries = entries.
//  3. No slice of mm outlives the lock: readers copy values out.
//  4. path is the file's current name (segment.markDeleted renames it under
//     the exclusive lock).
type mmapIndex struct {
	fs         vfs.FS
	path       string
	mm         mmap.MMap
	entrySize  int
	entries    int
	capEntries int // allocated and mapped
	maxEntries int // the most a writable index may grow to (segment.index.bytes)
	writable   bool
	// dirty: the entries changed since the index was opened or last
	// fsynced. An index whose entries did not change (an idle partition's)
	// is not synced again. Growing and trimming the room past the entries
	// does not make it dirty: should a crash keep a size that was not
	// synced, the zeros past the entries fail the check at the next open
	// and the index is rebuilt (a scan, never a wrong answer).
	dirty bool
	// lazy: the file does not exist yet. A new segment's indexes are not
	// created with it but with its first batch (segment.createIndexFiles):
	// an idle partition is then its directory and its .log, two file
	// creations rather than four. A lazy index is empty; the operations
	// that need the file create it (openFile), the others have nothing to do.
	lazy bool

	// sum holds the key of every sumEvery-th entry (sum[j] = key(j*sumEvery)):
	// a small, cache-resident first level for the binary search, so a lookup
	// in a 10 MiB index touches a handful of its cache lines. When sumOK,
	// len(sum) == ceil(entries/sumEvery); otherwise searches go without it.
	sum   []int64
	sumOK bool
}

// indexGrowMin is the first allocation of a writable index (one page): 512
// offset-index entries, about 2 MiB of log at index.interval.bytes 4096.
const indexGrowMin = 4096

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
	if n != x.entries {
		x.dirty = true
	}
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
// writable index may grow to maxBytes. sound is false when the file was
// missing or not a whole number of entries.
func openIndex(fsys vfs.FS, path string, entrySize int, maxBytes int32, writable bool) (x *mmapIndex, sound bool, err error) {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	x = &mmapIndex{fs: fsys, path: path, entrySize: entrySize}
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	// A file created just now has mode 0644 and size 0; one that existed
	// empty is sound too, so tell them apart by the creation below.
	sound = fi.Size()%int64(entrySize) == 0
	x.entries = int(fi.Size() / int64(entrySize))
	if writable {
		err = x.mapWritableFile(f, fi.Size(), maxBytes)
	} else {
		err = x.mapReadOnlyFile(f, fi.Size())
	}
	if err != nil {
		x.emptyLocked()
		return nil, false, err
	}
	// The summary is built by the caller once the entries are checked
	// (rebuildSumLocked): an unchecked file may be megabytes of
	// preallocated zeros, not worth faulting in.
	return x, sound, nil
}

// lazyIndex is an empty index whose file is not created yet (writable, growing
// to at most maxBytes).
func lazyIndex(fsys vfs.FS, path string, entrySize int, maxBytes int32) *mmapIndex {
	return &mmapIndex{fs: fsys, path: path, entrySize: entrySize, writable: true,
		maxEntries: max(int(maxBytes)/entrySize, 1), lazy: true}
}

// openFile opens the index file for one operation (creating it, if lazy); the
// caller closes it.
func (x *mmapIndex) openFile() (vfs.File, int64, error) {
	flag := os.O_RDWR
	if x.lazy {
		flag |= os.O_CREATE
	}
	f, err := x.fs.OpenFile(x.path, flag, 0o644)
	if err != nil {
		return nil, 0, err
	}
	x.lazy = false
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
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
	x.entries, x.capEntries, x.maxEntries, x.writable = 0, 0, 0, false
	x.sum, x.sumOK = x.sum[:0], true
}

// mapWritableLocked makes the index writable, growing to at most maxBytes
// (rounded down to whole entries, never below the current entries), with
// room allocated and mapped for its entries (and no more than growth needs).
// On failure the index is left empty (emptyLocked).
func (x *mmapIndex) mapWritableLocked(maxBytes int32) error {
	f, size, err := x.openFile()
	if err == nil {
		err = x.mapWritableFile(f, size, maxBytes)
		f.Close()
	}
	if err != nil {
		x.emptyLocked()
	}
	return err
}

func (x *mmapIndex) mapWritableFile(f vfs.File, size int64, maxBytes int32) error {
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
	x.maxEntries = maxEntries
	x.capEntries = 0
	x.writable = true
	// Space beyond the entries (a file preallocated in full by an
	// earlier version, or zeros a crash left) is given back.
	capEntries := 0
	if x.entries > 0 {
		capEntries = x.grownCap(x.entries)
	}
	if size > int64(capEntries*x.entrySize) {
		if err := f.Truncate(int64(capEntries * x.entrySize)); err != nil {
			return err
		}
	}
	return x.allocLocked(f, capEntries)
}

// grownCap is the capacity, in entries, an index needing room for n entries
// grows to: twice the current one (at least indexGrowMin bytes), enough for
// n, at most maxEntries.
func (x *mmapIndex) grownCap(n int) int {
	b := max(2*x.capEntries*x.entrySize, indexGrowMin)
	for b < n*x.entrySize {
		b *= 2
	}
	return max(min(b/x.entrySize, x.maxEntries), n)
}

// allocLocked reserves the file's blocks up to capEntries entries (an
// fallocate: no hole for the mapping to fault on) and maps that much
// read-write. On failure the old mapping and capacity stay.
func (x *mmapIndex) allocLocked(f vfs.File, capEntries int) error {
	if capEntries <= x.capEntries && x.mm != nil {
		return nil
	}
	size := int64(capEntries * x.entrySize)
	if size == 0 {
		return nil
	}
	if err := preallocate(f, size); err != nil {
		return err
	}
	mm, err := mapFile(f, int(size), mmap.RDWR)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", x.path, err)
	}
	if err := x.unmapLocked(); err != nil {
		mm.Unmap()
		return err
	}
	x.mm = mm
	x.capEntries = capEntries
	return nil
}

// reserveLocked makes room for n more entries in a writable index, growing
// it when needed (up to maxEntries: fullFor says when even that is not
// enough). Nothing changes on failure (ENOSPC on a full disk, typically):
// the index keeps its entries and its mapping.
func (x *mmapIndex) reserveLocked(n int) error {
	if !x.writable || x.entries+n <= x.capEntries || x.capEntries >= x.maxEntries {
		return nil
	}
	f, _, err := x.openFile()
	if err != nil {
		return err
	}
	defer f.Close()
	return x.allocLocked(f, x.grownCap(min(x.entries+n, x.maxEntries)))
}

// mapReadOnlyLocked truncates the file to its entries and maps it read-only.
// On failure the index is left empty (emptyLocked).
func (x *mmapIndex) mapReadOnlyLocked() error {
	if x.lazy && x.entries == 0 {
		x.writable, x.maxEntries, x.capEntries = false, 0, 0 // nothing to trim: no file
		return nil
	}
	f, size, err := x.openFile()
	if err == nil {
		err = x.mapReadOnlyFile(f, size)
		f.Close()
	}
	if err != nil {
		x.emptyLocked()
	}
	return err
}

func (x *mmapIndex) mapReadOnlyFile(f vfs.File, fileSize int64) error {
	if err := x.unmapLocked(); err != nil {
		return err
	}
	size := int64(x.entries * x.entrySize)
	if fileSize != size {
		if err := f.Truncate(size); err != nil {
			return err
		}
	}
	x.writable = false
	x.maxEntries, x.capEntries = x.entries, x.entries
	if size == 0 {
		return nil
	}
	mm, err := mapFile(f, int(size), mmap.RDONLY)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", x.path, err)
	}
	x.mm = mm
	return nil
}

// fullFor reports whether n more entries would not fit even at the
// index's largest size (the segment must roll).
func (x *mmapIndex) fullFor(n int) bool { return x.writable && x.entries+n > x.maxEntries }

// appendLocked copies e (one entry) after the last entry, growing the index
// when it has no room left (Append reserves the room before it writes, so
// that a full disk fails the append instead). It does nothing (and says
// false) when the index is not writable, is full or cannot grow: an entry
// less costs a longer scan, never a wrong answer.
func (x *mmapIndex) appendLocked(e []byte) bool {
	if !x.writable {
		return false
	}
	if x.entries >= x.capEntries && (x.reserveLocked(1) != nil || x.entries >= x.capEntries) {
		return false
	}
	copy(x.mm[x.entries*x.entrySize:], e)
	x.dirty = true
	if x.sumOK && x.entries%sumEvery == 0 {
		x.sum = append(x.sum, x.key(x.entries))
	}
	x.entries++
	return true
}

// rewriteLocked replaces the content with data (whole entries) and maps it
// again, writable (growing to at most maxBytes) or read-only.
func (x *mmapIndex) rewriteLocked(data []byte, writable bool, maxBytes int32) error {
	if err := x.unmapLocked(); err != nil {
		return err
	}
	x.capEntries = 0
	if x.lazy && len(data) == 0 {
		// Still no entry: still no file.
		x.entries = 0
		if writable {
			x.writable, x.maxEntries = true, max(int(maxBytes)/x.entrySize, 1)
		} else {
			x.writable, x.maxEntries = false, 0
		}
		x.rebuildSumLocked()
		return nil
	}
	x.dirty = true
	f, size, err := x.openFile()
	if err != nil {
		x.emptyLocked()
		return err
	}
	defer f.Close()
	// No truncation first: the mapping below trims or allocates, and
	// bytes past the entries are never read.
	if len(data) > 0 {
		if _, err := f.WriteAt(data, 0); err != nil {
			x.emptyLocked()
			return err
		}
		size = max(size, int64(len(data)))
	}
	x.entries = len(data) / x.entrySize
	if writable {
		err = x.mapWritableFile(f, size, maxBytes)
	} else {
		err = x.mapReadOnlyFile(f, size)
	}
	if err != nil {
		x.emptyLocked()
	}
	x.rebuildSumLocked()
	return err
}

// syncLocked makes the entries durable (nothing to do when the index has not
// changed since it was opened or last synced).
func (x *mmapIndex) syncLocked() error {
	if !x.dirty {
		return nil
	}
	if x.mm != nil && x.writable {
		if err := x.mm.Flush(); err != nil {
			return err
		}
	}
	return x.fsyncFile()
}

// fsyncFile fsyncs the index file (through a descriptor opened for it: the
// inode's dirty pages are synced whichever descriptor asks).
func (x *mmapIndex) fsyncFile() error {
	f, _, err := x.openFile()
	if err != nil {
		return err
	}
	err = f.Sync()
	if e := f.Close(); err == nil {
		err = e
	}
	if err == nil {
		x.dirty = false
	}
	return err
}

// fsyncIfDirtyLocked fsyncs the file when it changed since it was opened or
// last synced.
func (x *mmapIndex) fsyncIfDirtyLocked() error {
	if !x.dirty {
		return nil
	}
	return x.fsyncFile()
}

// closeLocked trims a writable index to its entries and unmaps it.
func (x *mmapIndex) closeLocked() error {
	var err error
	if x.writable {
		err = x.mapReadOnlyLocked()
	}
	if e := x.unmapLocked(); err == nil {
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
