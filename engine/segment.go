package engine

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/samsa-broker/samsa/engine/vfs"
	"github.com/samsa-broker/samsa/internal/invariants"
)

// File suffixes of a segment.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	snapshotSuffix  = ".snapshot"
	txnIndexSuffix  = ".txnindex"
	deletedSuffix   = ".deleted"
	tmpSuffix       = ".tmp"
)

// segmentFileName is "<20-digit base offset><suffix>".
func segmentFileName(base int64, suffix string) string {
	return fmt.Sprintf("%020d%s", base, suffix)
}

const unknownTimestamp = math.MinInt64

// segment is one <base>.log file with its two indexes.
//
// Invariants:
//  1. Offsets of the batches in the file increase strictly and lie in
//     [base, base+MaxUint32]; size is the end of the last whole batch.
//  2. Bytes below size are written and never change (except by truncation).
//  3. The appender fields are touched only under Log.appendMu (or with the
//     segment not yet published).
//  4. refs counts the owning log (1 while the segment is in the log's list)
//     plus every pin; at zero the files are closed, and removed if deleted.
type segment struct {
	base int64
	dir  string
	fs   vfs.FS
	log  vfs.File
	osf  *os.File  // the OS file under log, for Slice.File (sendfile)
	fail *failures // the manager's counters
	rm   *remover  // the manager's, for the files once deleted and released

	size   atomic.Int64 // published length of the log file
	next   atomic.Int64 // offset after the last batch (base if empty)
	maxTs  atomic.Int64 // largest batch timestamp, unknownTimestamp until known
	offMax atomic.Int64 // last offset of the batch with maxTs

	// Appender-owned.
	bytesSinceIndex int64
	rollAtMs        int64 // clock time of the first append; 0 = not yet
	idxSynced       bool  // indexes of this (inactive) segment are durable
	noProducers     bool  // recovery scanned it and saw no idempotent batch
	preallocated    int64 // the file holds zeros up to here, past size (prealloc.go); 0 = none
	preallocChunk   int64 // the next chunk of zeros to write ahead
	noPrealloc      bool  // writing zeros ahead failed once (a full disk): this segment grows as it goes

	idxMu    sync.RWMutex
	oidx     *offsetIndex // nil until loaded
	tidx     *timeIndex
	idxBad   atomic.Bool // a lookup found an entry that disagrees with the log
	writable bool
	idxLazy  atomic.Bool // an index file is not created yet: the segment holds no batch
	tail     *tailRing   // the last batches appended, for tail reads (tail_ring.go; under idxMu)

	refs    atomic.Int32
	deleted atomic.Bool

	firstTs atomic.Int64 // max timestamp of the first batch, unknownTimestamp until read (firstBatchTimestamp)

	tix txnIndex // the aborted transactions whose markers it holds (.txnindex)

	synced syncedLen // how much of the file a completed fdatasync covered (flusher_writeback.go)
}

// segmentSuffixes are the files of a segment: its log and its indexes.
var segmentSuffixes = [...]string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix}

func (s *segment) path(suffix string) string {
	name := segmentFileName(s.base, suffix)
	if s.deleted.Load() {
		name += deletedSuffix
	}
	return filepath.Join(s.dir, name)
}

// createSegment creates an empty segment (replacing stale files of the same
// base): its .log, and writable indexes whose files are created with its
// first batch (createIndexFiles).
//
// noStale says the caller knows no index file of base exists (loadLog has
// just removed the orphans of a directory holding no segment): the removals
// are skipped.
func createSegment(m *Manager, dir string, base int64, cfg *LogConfig, noStale bool) (*segment, error) {
	fsys := m.fs
	s := &segment{base: base, dir: dir, fs: fsys, fail: &m.fail, rm: m.rm}
	f, err := fsys.OpenFile(s.path(logSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	s.log, s.osf = f, vfs.OSFile(f)
	s.next.Store(base)
	s.maxTs.Store(-1)
	s.offMax.Store(base)
	s.firstTs.Store(unknownTimestamp)
	for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if noStale {
			break
		}
		if err := fsys.Remove(s.path(suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
			f.Close()
			return nil, err
		}
	}
	s.idxMu.Lock()
	s.oidx = &offsetIndex{mmapIndex: *lazyIndex(fsys, s.path(indexSuffix), offsetEntrySize, cfg.SegmentIndexBytes), base: base}
	s.tidx = &timeIndex{mmapIndex: *lazyIndex(fsys, s.path(timeIndexSuffix), timeEntrySize, cfg.SegmentIndexBytes), base: base}
	s.oidx.rebuildSumLocked() // empty
	s.tidx.rebuildSumLocked()
	s.writable = true
	s.idxLazy.Store(true)
	s.idxMu.Unlock()
	s.refs.Store(1)
	return s, nil
}

// openSegment opens an existing log file; its indexes are opened later.
func openSegment(m *Manager, dir string, base int64) (*segment, error) {
	s := &segment{base: base, dir: dir, fs: m.fs, fail: &m.fail, rm: m.rm}
	f, err := m.fs.OpenFile(s.path(logSuffix), os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	s.log, s.osf = f, vfs.OSFile(f)
	size := fi.Size()
	if size > maxSegmentBytes {
		size = maxSegmentBytes // the tail is unreachable by 32-bit positions; recovery cuts it
	}
	s.size.Store(size)
	s.next.Store(base)
	s.maxTs.Store(unknownTimestamp)
	s.offMax.Store(base)
	s.firstTs.Store(unknownTimestamp)
	s.refs.Store(1)
	return s, nil
}

// openIndexesLocked opens both index files as they are on disk (creating
// missing ones). sound is false when a file was missing or ragged. An empty
// segment's missing index is not damage but not created yet (createSegment):
// it stays so, lazy, and sound.
func (s *segment) openIndexesLocked(writable bool, maxBytes int32) (sound bool, err error) {
	_, e1 := s.fs.Stat(s.path(indexSuffix))
	_, e2 := s.fs.Stat(s.path(timeIndexSuffix))
	empty := s.size.Load() == 0
	open := func(missing error, path string, entrySize int) (*mmapIndex, bool, error) {
		if missing != nil && errors.Is(missing, os.ErrNotExist) && empty {
			x := lazyIndex(s.fs, path, entrySize, maxBytes)
			if !writable {
				x.writable, x.maxEntries = false, 0
			}
			return x, true, nil
		}
		x, ok, err := openIndex(s.fs, path, entrySize, maxBytes, writable)
		return x, ok && missing == nil, err
	}
	oi, ok1, err := open(e1, s.path(indexSuffix), offsetEntrySize)
	if err != nil {
		return false, err
	}
	ti, ok2, err := open(e2, s.path(timeIndexSuffix), timeEntrySize)
	if err != nil {
		oi.closeLocked()
		return false, err
	}
	s.oidx = &offsetIndex{mmapIndex: *oi, base: s.base}
	s.tidx = &timeIndex{mmapIndex: *ti, base: s.base}
	s.writable = writable
	s.idxLazy.Store(oi.lazy || ti.lazy)
	return ok1 && ok2, nil
}

// createIndexFiles creates the index files not created yet, before the
// segment's first batch is written (a crash after the write then finds them,
// and a missing index of a segment with batches is damage, rebuilt at open).
func (s *segment) createIndexFiles() error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if s.oidx == nil || !s.idxLazy.Load() {
		return nil
	}
	for _, x := range []*mmapIndex{&s.oidx.mmapIndex, &s.tidx.mmapIndex} {
		if !x.lazy {
			continue
		}
		f, _, err := x.openFile()
		if err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	s.idxLazy.Store(false)
	return nil
}

// trimIndexesLocked truncates the indexes to their entries and maps them
// read-only (segment roll).
func (s *segment) trimIndexesLocked() error {
	s.writable = false
	if s.oidx == nil {
		return nil
	}
	err := s.oidx.mapReadOnlyLocked()
	if e := s.tidx.mapReadOnlyLocked(); err == nil {
		err = e
	}
	return err
}

// ensureIndexes loads the indexes of an inactive segment on first use,
// checking them and rebuilding them from the log when they are missing or
// inconsistent (or when a lookup found them wrong). end is the offset after
// the segment (the next segment's base).
func (s *segment) ensureIndexes(cfg *LogConfig) error {
	s.idxMu.RLock()
	ok := s.oidx != nil && !s.idxBad.Load()
	s.idxMu.RUnlock()
	if ok {
		return nil
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if s.oidx != nil && !s.idxBad.Load() {
		return nil
	}
	if s.oidx == nil {
		sound, err := s.openIndexesLocked(false, cfg.SegmentIndexBytes)
		if err != nil {
			return ioFailure(fmt.Sprintf("indexes of segment %d", s.base), err)
		}
		if sound && s.checkIndexesLocked() {
			s.oidx.rebuildSumLocked()
			s.tidx.rebuildSumLocked()
			s.loadMaxTimestampLocked()
			return nil
		}
	}
	s.idxBad.Store(false)
	s.fail.indexRebuilds.Add(1)
	if err := s.rebuildIndexesLocked(cfg); err != nil {
		s.idxBad.Store(true) // try again at the next use
		return ioFailure(fmt.Sprintf("rebuild indexes of segment %d", s.base), err)
	}
	return nil
}

// checkIndexesLocked checks both indexes against the segment's offsets and
// size. An empty offset index is suspicious for a segment that should have
// entries.
func (s *segment) checkIndexesLocked() bool {
	end, size := s.next.Load(), s.size.Load()
	if end <= s.base {
		end = math.MaxInt64
	}
	if s.oidx.entries == 0 && size > 2*scanBufSize+2*int64(defaultMaxBatch) {
		return false
	}
	return s.oidx.checkLocked(end, size) && s.tidx.checkLocked(end)
}

// defaultMaxBatch bounds the batch size the empty-index check allows for.
const defaultMaxBatch = 1048588

// loadMaxTimestampLocked takes the largest timestamp from the time index.
func (s *segment) loadMaxTimestampLocked() {
	if s.maxTs.Load() != unknownTimestamp {
		return
	}
	if ts, off, ok := s.tidx.lastEntry(); ok {
		s.offMax.Store(off)
		s.maxTs.Store(ts)
	}
}

// rebuildIndexesLocked scans the log's headers (framing only: the bytes are
// below the recovery point) and rewrites both indexes.
func (s *segment) rebuildIndexesLocked(cfg *LogConfig) error {
	b := newIndexBuilder(s.base, cfg.IndexIntervalBytes)
	sc := getScanner(s.log, s.size.Load())
	defer putScanner(sc)
	var pos int64
	for pos < sc.limit {
		h, err := sc.header(pos)
		if err != nil {
			break
		}
		b.add(&h, pos)
		pos += h.Size()
	}
	b.finish()
	if err := s.oidx.rewriteLocked(b.oidx, s.writable, cfg.SegmentIndexBytes); err != nil {
		return err
	}
	if err := s.tidx.rewriteLocked(b.tidx, s.writable, cfg.SegmentIndexBytes); err != nil {
		return err
	}
	s.maxTs.Store(b.maxTs)
	s.offMax.Store(b.offMax)
	return nil
}

// largestTimestamp is the segment's largest batch timestamp, or the file's
// modification time when no batch carries one (as Kafka).
func (s *segment) largestTimestamp(cfg *LogConfig) int64 {
	if s.maxTs.Load() == unknownTimestamp {
		if err := s.ensureIndexes(cfg); err != nil {
			return math.MaxInt64 // unknown: never expire on an I/O error
		}
	}
	if ts := s.maxTs.Load(); ts > 0 {
		return ts
	}
	fi, err := s.log.Stat()
	if err != nil {
		return math.MaxInt64
	}
	return fi.ModTime().UnixMilli()
}

// lookupPos returns a file position at or before the batch holding target,
// from the offset index, checked against the batch header it points at.
func (s *segment) lookupPos(target int64, sc *scanner, cfg *LogConfig) int64 {
	if err := s.ensureIndexes(cfg); err != nil {
		return 0
	}
	s.idxMu.RLock()
	var (
		off, pos int64
		ok       bool
	)
	if s.oidx != nil {
		off, pos, ok = s.oidx.lookup(target)
	}
	s.idxMu.RUnlock()
	if !ok {
		return 0
	}
	// The entry may be newer than the size the scanner was given: entries
	// are published after the size (package doc, invariant 1).
	if l := s.size.Load(); l > sc.limit {
		sc.limit = l
	}
	h, err := sc.header(pos)
	if err != nil || h.LastOffset() != off {
		s.idxBad.Store(true)
		return 0
	}
	return pos
}

// pin takes a reference; the caller must know the segment is alive (it holds
// Log.mu and found the segment in the list, or already holds a pin).
// Invariants builds panic when it was not (a count below one before: the
// files may be closed already).
func (s *segment) pin() {
	n := s.refs.Add(1)
	if invariants.Enabled && n < 2 {
		panic(fmt.Sprintf("engine: invariant broken: a segment is pinned only while referenced: pin of segment %d (%s) at refcount %d", s.base, s.dir, n-1))
	}
}

// release drops a reference; the last one closes the files and, for a deleted
// segment, removes them. Invariants builds panic when the count goes below
// zero (a release without its reference).
func (s *segment) release() {
	n := s.refs.Add(-1)
	if invariants.Enabled && n < 0 {
		panic(fmt.Sprintf("engine: invariant broken: segment refcount never below zero: release of segment %d (%s) to %d", s.base, s.dir, n))
	}
	if n != 0 {
		return
	}
	s.idxMu.Lock()
	if s.oidx != nil {
		s.oidx.closeLocked()
		s.tidx.closeLocked()
		s.oidx, s.tidx = nil, nil
	}
	s.idxMu.Unlock()
	s.closeTxn()
	if s.deleted.Load() && s.rm != nil && s.rm.handOff(s) {
		return // remover.go: cut down and removed in the background
	}
	s.log.Close()
	if s.deleted.Load() {
		s.removeFiles()
	}
}

// removeFiles removes the files of a deleted segment.
func (s *segment) removeFiles() {
	for _, suf := range segmentSuffixes {
		s.fs.Remove(s.path(suf))
	}
}

// markDeleted renames the files to *.deleted. The log file goes first, so a
// crash in between leaves orphan indexes, which Open removes. A log file that
// cannot be renamed is removed at once (readers keep their descriptor); the
// error says that it is still there under its live name, where the next
// Open would take it for data. Failing index renames leave orphans, which
// Open removes.
func (s *segment) markDeleted() error {
	// Under idxMu, so that an index operation opening its file (they hold
	// no descriptor) finds it under its current name.
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	defer s.renamedIndexesLocked()
	var first error
	for i, suf := range segmentSuffixes {
		old := filepath.Join(s.dir, segmentFileName(s.base, suf))
		err := s.fs.Rename(old, old+deletedSuffix)
		if err == nil || errors.Is(err, os.ErrNotExist) || i > 0 {
			continue
		}
		if rerr := s.fs.Remove(old); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			first = ioFailure(fmt.Sprintf("delete segment %d", s.base), err)
		}
	}
	s.deleted.Store(true)
	return first
}

// unmarkDeleted undoes markDeleted (a roll or truncation that failed after
// renaming).
func (s *segment) unmarkDeleted() {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	defer s.renamedIndexesLocked()
	for _, suf := range segmentSuffixes {
		cur := filepath.Join(s.dir, segmentFileName(s.base, suf))
		s.fs.Rename(cur+deletedSuffix, cur)
	}
	s.deleted.Store(false)
}

// renamedIndexesLocked points the loaded indexes at their files' names
// after markDeleted or unmarkDeleted.
func (s *segment) renamedIndexesLocked() {
	if s.oidx != nil {
		s.oidx.path = s.path(indexSuffix)
		s.tidx.path = s.path(timeIndexSuffix)
	}
}

// indexBuilder computes index entries for a sequence of batches, with the same
// rule as the append path.
type indexBuilder struct {
	base, interval  int64
	bytesSinceIndex int64
	maxTs, offMax   int64
	lastTimeTs      int64
	lastTimeOff     int64
	oidx, tidx      []byte
}

func newIndexBuilder(base int64, interval int32) *indexBuilder {
	return &indexBuilder{base: base, interval: int64(interval), maxTs: -1, offMax: base, lastTimeTs: math.MinInt64, lastTimeOff: -1}
}

func (b *indexBuilder) add(h *BatchHeader, pos int64) {
	if h.MaxTimestamp > b.maxTs {
		b.maxTs, b.offMax = h.MaxTimestamp, h.LastOffset()
	}
	if b.bytesSinceIndex > b.interval {
		var e [timeEntrySize]byte
		putOffsetEntry(e[:], uint32(h.LastOffset()-b.base), uint32(pos))
		b.oidx = append(b.oidx, e[:offsetEntrySize]...)
		b.addTime()
		b.bytesSinceIndex = 0
	}
	b.bytesSinceIndex += h.Size()
}

func (b *indexBuilder) addTime() {
	if b.maxTs > b.lastTimeTs && b.offMax > b.lastTimeOff {
		var e [timeEntrySize]byte
		putTimeEntry(e[:], b.maxTs, uint32(b.offMax-b.base))
		b.tidx = append(b.tidx, e[:]...)
		b.lastTimeTs, b.lastTimeOff = b.maxTs, b.offMax
	}
}

// finish adds the final time-index entry a rolled segment carries.
func (b *indexBuilder) finish() {
	if b.maxTs >= 0 {
		b.addTime()
	}
}

// scanner reads batch headers from a segment file through a pooled buffer,
// reading ahead for small batches and just the header for large ones.
type scanner struct {
	f      vfs.File
	limit  int64 // bytes past limit are not read
	buf    [scanBufSize]byte
	bufPos int64
	bufLen int
	large  bool
}

const scanBufSize = 8192

var scannerPool = sync.Pool{New: func() any { return new(scanner) }}

func getScanner(f vfs.File, limit int64) *scanner {
	sc := scannerPool.Get().(*scanner)
	sc.f, sc.limit, sc.bufLen, sc.large = f, limit, 0, false
	return sc
}

func putScanner(sc *scanner) {
	sc.f = nil
	scannerPool.Put(sc)
}

var errTruncated = fmt.Errorf("%w: batch runs past the end of the segment", ErrCorruptBatch)

// header returns the header of the batch at pos, checking framing and that
// the whole batch lies below limit.
func (sc *scanner) header(pos int64) (BatchHeader, error) {
	if pos < 0 || pos+BatchHeaderSize > sc.limit {
		return BatchHeader{}, errTruncated
	}
	if pos < sc.bufPos || pos+BatchHeaderSize > sc.bufPos+int64(sc.bufLen) {
		n := int64(scanBufSize)
		if sc.large {
			n = BatchHeaderSize
		}
		if rem := sc.limit - pos; rem < n {
			n = rem
		}
		m, err := sc.f.ReadAt(sc.buf[:n], pos)
		if err != nil && !(errors.Is(err, io.EOF) && m >= BatchHeaderSize) {
			sc.bufLen = 0
			if errors.Is(err, io.EOF) {
				return BatchHeader{}, errTruncated
			}
			return BatchHeader{}, err
		}
		sc.bufPos, sc.bufLen = pos, m
	}
	off := int(pos - sc.bufPos)
	h, err := ParseBatchHeader(sc.buf[off : off+BatchHeaderSize])
	if err != nil {
		return h, storedBatchError(err)
	}
	if pos+h.Size() > sc.limit {
		return h, errTruncated
	}
	sc.large = h.Size() >= scanBufSize/2
	return h, nil
}

// storedBatchError is the error for a stored batch whose header does not
// parse: the engine stores only magic 2, so any framing error on disk is
// corruption.
func storedBatchError(err error) error {
	if errors.Is(err, ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCorruptBatch, err)
}
