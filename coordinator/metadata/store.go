package metadata

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// StoreOptions configure a Store.
type StoreOptions struct {
	// SnapshotEvery: write a snapshot once this many records were appended since the
	// last one (0: 10000; negative: never by count).
	SnapshotEvery int
	// SnapshotBytes: write a snapshot once the log holds this many bytes since the last
	// one (0: 16 MiB; negative: never by size).
	SnapshotBytes int64
	// Logger receives replay and snapshot events (nil: discard).
	Logger *slog.Logger

	noSync bool // tests only (fuzzing): skip fsync, nothing is durable
}

const (
	logSuffix      = ".log"
	snapshotSuffix = ".snapshot"
	tmpSuffix      = ".tmp"
	snapshotMagic  = "SMSNAP01"
	snapshotChunk  = 1000 // records per entry in a snapshot

	maxSnapshotSize = 1 << 30 // larger snapshot files are treated as corrupt
)

// Store is the one-node home of the metadata log: the log files, the snapshots and the
// current image. It is safe for concurrent use: Image is lock-free, Append and
// AllocateProducerIDs are serialised.
//
// Invariants:
//  1. Every record in the log files was valid when appended, so replay applies each one
//     without error; a record that fails on replay means corruption.
//  2. Offsets count records. The log file named N holds the records from offset N on,
//     in whole entries; a snapshot named N is the image after the first N records, and N
//     falls on an entry boundary.
//  3. The published image is the image after every record in the active log file, all
//     of which are synced: nothing is published before it is durable.
type Store struct {
	dir    string
	opts   StoreOptions
	log    *slog.Logger
	image  atomic.Pointer[Image]
	unlock func() error

	mu struct {
		sync.Mutex
		f          *os.File // active log file
		base       int64    // its first offset
		size       int64    // its valid length in bytes
		next       int64    // offset of the next record
		snapOffset int64    // offset of the newest snapshot
		snapBytes  int64    // log bytes appended since that snapshot
		snapRetry  int64    // offset before which no snapshot is retried after a failure
		buf        []byte
		failed     error
		closed     bool
	}
}

// OpenStore opens (creating if needed) the metadata store in dir and replays it: the
// newest valid snapshot, then the log records after it. A torn or corrupt tail of the
// last log file is truncated (and logged); missing records in the middle (a gap that no
// snapshot covers) fail with ErrCorrupt rather than silently lose metadata.
func OpenStore(dir string, opts StoreOptions) (*Store, error) {
	if opts.SnapshotEvery == 0 {
		opts.SnapshotEvery = 10000
	}
	if opts.SnapshotBytes == 0 {
		opts.SnapshotBytes = 16 << 20
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, opts: opts, log: lg, unlock: unlock}
	if err := s.replay(); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Image returns the current image. It never blocks.
func (s *Store) Image() *Image { return s.image.Load() }

// Offset returns the number of records in the log (the offset of the next one).
func (s *Store) Offset() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.next
}

// Append applies recs to the current image and, if they are valid, writes them as one
// entry, syncs it and publishes the new image. It is all-or-nothing: on any error the
// image is unchanged, and replay never sees part of an entry. A validation error wraps
// ErrInvalidRecord, ErrTopicExists or ErrUnknownTopic; an I/O error wraps ErrStoreFailed
// and leaves the store refusing appends until reopened.
func (s *Store) Append(recs ...Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.appendLocked(recs)
	return err
}

// AllocateProducerIDs hands out n consecutive producer ids to brokerID and returns the
// first. The allocation is durable before it returns, so ids never repeat, even across
// restarts. (Kafka hands brokers blocks of 1000.)
func (s *Store) AllocateProducerIDs(brokerID int32, n int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.image.Load().NextProducerID()
	if n <= 0 || first > math.MaxInt64-n {
		return 0, fmt.Errorf("%w: allocate %d producer ids after %d", ErrInvalidRecord, n, first)
	}
	if _, err := s.appendLocked([]Record{&ProducerIDsRecord{BrokerID: brokerID, NextProducerID: first + n}}); err != nil {
		return 0, err
	}
	return first, nil
}

func (s *Store) appendLocked(recs []Record) (*Image, error) {
	if s.mu.closed {
		return nil, ErrClosed
	}
	if s.mu.failed != nil {
		return nil, fmt.Errorf("%w: %v", ErrStoreFailed, s.mu.failed)
	}
	cur := s.image.Load()
	if len(recs) == 0 {
		return cur, nil
	}
	next, err := cur.Apply(recs...)
	if err != nil {
		return nil, err
	}
	buf, err := encodeEntryChecked(s.mu.buf[:0], recs)
	if err != nil {
		return nil, err
	}
	s.mu.buf = buf
	if err := s.writeLocked(buf); err != nil {
		return nil, err
	}
	s.mu.next += int64(len(recs))
	s.mu.snapBytes += int64(len(buf))
	s.image.Store(next)
	if cap(s.mu.buf) > 1<<20 {
		s.mu.buf = nil
	}
	s.maybeSnapshotLocked(next)
	return next, nil
}

// encodeEntryChecked is EncodeEntry with the size limits enforced.
func encodeEntryChecked(dst []byte, recs []Record) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, entryMagic)
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	for i, r := range recs {
		at := len(dst)
		dst = Encode(dst, r)
		if len(dst)-at > MaxRecordSize+frameHeaderSize {
			return nil, fmt.Errorf("%w: record %d encodes to %d bytes, limit %d", ErrInvalidRecord, i, len(dst)-at, MaxRecordSize)
		}
		if len(dst)-start > MaxEntrySize {
			return nil, fmt.Errorf("%w: batch exceeds %d bytes", ErrInvalidRecord, MaxEntrySize)
		}
	}
	return finishFrame(dst, start), nil
}

// writeLocked appends buf to the active log and syncs it. On failure it cuts the file
// back to its last good length and marks the store failed.
func (s *Store) writeLocked(buf []byte) error {
	f := s.mu.f
	_, err := f.WriteAt(buf, s.mu.size)
	if err == nil {
		err = s.sync(f)
	}
	if err != nil {
		if terr := f.Truncate(s.mu.size); terr != nil {
			err = errors.Join(err, terr)
		}
		s.mu.failed = err
		return fmt.Errorf("%w: append to %s: %v", ErrStoreFailed, f.Name(), err)
	}
	s.mu.size += int64(len(buf))
	return nil
}

// Snapshot writes a snapshot of the current image now and starts a new log file.
func (s *Store) Snapshot() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	if s.mu.failed != nil {
		return fmt.Errorf("%w: %v", ErrStoreFailed, s.mu.failed)
	}
	return s.snapshotLocked(s.image.Load())
}

func (s *Store) maybeSnapshotLocked(im *Image) {
	since := s.mu.next - s.mu.snapOffset
	due := (s.opts.SnapshotEvery > 0 && since >= int64(s.opts.SnapshotEvery)) ||
		(s.opts.SnapshotBytes > 0 && s.mu.snapBytes >= s.opts.SnapshotBytes)
	if !due || s.mu.next < s.mu.snapRetry {
		return
	}
	if err := s.snapshotLocked(im); err != nil {
		// The append itself is durable; retry after another interval's worth of records.
		s.mu.snapRetry = s.mu.next + max(int64(s.opts.SnapshotEvery), 1000)
		s.log.Warn("metadata snapshot failed", "dir", s.dir, "offset", s.mu.next, "err", err)
	}
}

// snapshotLocked writes the snapshot at s.mu.next, then rolls the log so that the new
// log starts where the snapshot ends, then deletes what the snapshot covers. A crash at
// any step leaves a directory that replays to the same image.
func (s *Store) snapshotLocked(im *Image) error {
	off := s.mu.next
	if err := writeSnapshot(s.dir, off, im, !s.opts.noSync); err != nil {
		return err
	}
	if off != s.mu.base {
		f, err := createLog(s.dir, off, !s.opts.noSync)
		if err != nil {
			return err
		}
		old := s.mu.f
		s.mu.f, s.mu.base, s.mu.size = f, off, 0
		if err := old.Close(); err != nil {
			s.log.Warn("metadata: closing rolled log", "file", old.Name(), "err", err)
		}
	}
	s.mu.snapOffset, s.mu.snapBytes = off, 0
	s.removeCoveredLocked()
	s.log.Info("metadata snapshot written", "dir", s.dir, "offset", off, "topics", im.NumTopics())
	return nil
}

// removeCoveredLocked deletes log files whose records a snapshot holds, and snapshots
// older than the newest valid one. Failures are logged: stale files cost space, never correctness.
func (s *Store) removeCoveredLocked() {
	logs, snaps, err := listDir(s.dir)
	if err != nil {
		s.log.Warn("metadata: listing for cleanup", "dir", s.dir, "err", err)
		return
	}
	// A log file may go once the next one starts at or before the newest valid snapshot:
	// every record it holds is then in that snapshot.
	for i := 0; i+1 < len(logs); i++ {
		if logs[i+1] <= s.mu.snapOffset && logs[i] < s.mu.base {
			s.remove(fileName(logs[i], logSuffix))
		}
	}
	for _, o := range snaps {
		if o < s.mu.snapOffset {
			s.remove(fileName(o, snapshotSuffix))
		}
	}
}

func (s *Store) remove(name string) {
	if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("metadata: removing covered file", "file", name, "err", err)
	}
}

// Close closes the store. Later calls return ErrClosed; Image keeps working.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	s.mu.closed = true
	return s.closeFiles()
}

func (s *Store) closeFiles() error {
	var errs []error
	if s.mu.f != nil {
		errs = append(errs, s.mu.f.Close())
		s.mu.f = nil
	}
	if s.unlock != nil {
		errs = append(errs, s.unlock())
		s.unlock = nil
	}
	return errors.Join(errs...)
}

func fileName(off int64, suffix string) string { return fmt.Sprintf("%020d%s", off, suffix) }

// listDir returns the offsets of the log files and snapshots in dir, ascending, and
// removes leftover temporary files.
func listDir(dir string) (logs, snaps []int64, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("metadata: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, tmpSuffix) {
			_ = os.Remove(filepath.Join(dir, name))
			continue
		}
		for _, kind := range []struct {
			suffix string
			dst    *[]int64
		}{{logSuffix, &logs}, {snapshotSuffix, &snaps}} {
			stem, ok := strings.CutSuffix(name, kind.suffix)
			if !ok || len(stem) != 20 {
				continue
			}
			if off, err := strconv.ParseInt(stem, 10, 64); err == nil && off >= 0 {
				*kind.dst = append(*kind.dst, off)
			}
		}
	}
	slices.Sort(logs)
	slices.Sort(snaps)
	return logs, snaps, nil
}

func createLog(dir string, base int64, sync bool) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, fileName(base, logSuffix)), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if !sync {
		return f, nil
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("metadata: sync %s: %w", dir, err)
	}
	return nil
}

// writeSnapshot writes im as the snapshot at offset off: to a temporary file, synced,
// then renamed into place and the directory synced.
func writeSnapshot(dir string, off int64, im *Image, sync bool) error {
	recs := im.Records()
	count := len(recs)
	buf := make([]byte, 0, 64+count*48)
	buf = append(buf, snapshotMagic...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(off))
	for len(recs) > 0 {
		n := min(len(recs), snapshotChunk)
		var err error
		if buf, err = encodeEntryChecked(buf, recs[:n]); err != nil {
			return err
		}
		recs = recs[n:]
	}
	buf = binary.BigEndian.AppendUint64(buf, uint64(count))
	buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))

	final := filepath.Join(dir, fileName(off, snapshotSuffix))
	tmp := final + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	_, err = f.Write(buf)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("metadata: snapshot %d: %w", off, err)
	}
	if !sync {
		return nil
	}
	return syncDir(dir)
}

// readSnapshot parses a snapshot file: it returns the image and the offset it stands for.
func readSnapshot(b []byte) (*Image, int64, error) {
	const head, tail = len(snapshotMagic) + 8, 8 + 4
	if len(b) < head+tail || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return nil, 0, fmt.Errorf("%w: not a snapshot", ErrCorrupt)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, 0, fmt.Errorf("%w: snapshot checksum", ErrCorrupt)
	}
	off := int64(binary.BigEndian.Uint64(b[len(snapshotMagic):]))
	want := binary.BigEndian.Uint64(b[len(b)-tail:])
	if off < 0 {
		return nil, 0, fmt.Errorf("%w: snapshot offset %d", ErrCorrupt, off)
	}
	entries := b[head : len(b)-tail]
	bld := newBuilder(&Image{})
	var got uint64
	for len(entries) > 0 {
		recs, n, err := DecodeEntry(entries)
		if err != nil {
			return nil, 0, fmt.Errorf("snapshot: %w", err)
		}
		for _, r := range recs {
			if err := bld.apply(r); err != nil {
				return nil, 0, fmt.Errorf("%w: snapshot does not apply: %v", ErrCorrupt, err)
			}
		}
		got += uint64(len(recs))
		entries = entries[n:]
	}
	im := bld.im
	if got != want {
		return nil, 0, fmt.Errorf("%w: snapshot holds %d records, trailer says %d", ErrCorrupt, got, want)
	}
	return im, off, nil
}

// replay rebuilds the image from the directory and opens the active log.
func (s *Store) replay() error {
	logs, snaps, err := listDir(s.dir)
	if err != nil {
		return err
	}
	im, next := &Image{}, int64(0)
	for i := len(snaps) - 1; i >= 0; i-- {
		name := filepath.Join(s.dir, fileName(snaps[i], snapshotSuffix))
		b, err := readBounded(name, maxSnapshotSize)
		if err == nil {
			var off int64
			var sim *Image
			if sim, off, err = readSnapshot(b); err == nil && off != snaps[i] {
				err = fmt.Errorf("%w: snapshot says offset %d", ErrCorrupt, off)
			}
			if err == nil {
				im, next = sim, off
				break
			}
		}
		s.log.Warn("metadata: skipping unreadable snapshot", "file", name, "err", err)
	}
	snapOffset := next

	// One builder for the whole replay: every record was valid when appended, so any
	// failure is corruption and entry atomicity does not matter here; and the image's
	// maps are copied once rather than once per entry.
	b := newBuilder(im)
	active, activeSize := int64(-1), int64(0)
	for i, base := range logs {
		name := filepath.Join(s.dir, fileName(base, logSuffix))
		if base > next {
			return fmt.Errorf("%w: log %s starts at offset %d but records end at %d", ErrCorrupt, name, base, next)
		}
		off := base
		valid, err := s.scanLogFile(name, func(recs []Record) error {
			end := off + int64(len(recs))
			switch {
			case end <= next: // covered by the snapshot
			case off == next:
				for _, r := range recs {
					if err := b.apply(r); err != nil {
						return fmt.Errorf("%w: %s offset %d does not apply: %v", ErrCorrupt, name, off, err)
					}
				}
				next = end
			default:
				return fmt.Errorf("%w: %s: entry at %d straddles offset %d", ErrCorrupt, name, off, next)
			}
			off = end
			return nil
		})
		if err != nil {
			return err
		}
		if i == len(logs)-1 && off == next {
			active, activeSize = base, valid
		}
	}
	im = b.im

	s.image.Store(im)
	s.mu.next, s.mu.snapOffset = next, snapOffset
	if active >= 0 {
		f, err := os.OpenFile(filepath.Join(s.dir, fileName(active, logSuffix)), os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		if st, err := f.Stat(); err == nil && st.Size() != activeSize {
			if err := f.Truncate(activeSize); err != nil {
				f.Close()
				return fmt.Errorf("metadata: truncating torn tail: %w", err)
			}
			if err := s.sync(f); err != nil {
				f.Close()
				return fmt.Errorf("metadata: %w", err)
			}
		}
		s.mu.f, s.mu.base, s.mu.size = f, active, activeSize
		s.mu.snapBytes = activeSize
	} else {
		f, err := createLog(s.dir, next, !s.opts.noSync)
		if err != nil {
			return err
		}
		s.mu.f, s.mu.base, s.mu.size = f, next, 0
	}
	s.removeCoveredLocked()
	s.log.Info("metadata replayed", "dir", s.dir, "snapshot", snapOffset, "offset", next,
		"topics", im.NumTopics(), "brokers", len(im.brokers))
	return nil
}

var _ io.Closer = (*Store)(nil)

// readBounded reads a whole file that must not exceed limit bytes.
func readBounded(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes, limit %d", ErrCorrupt, name, st.Size(), limit)
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}

// scanLogFile streams the entries of a log file to fn and returns the length of the valid
// prefix. A torn or corrupt entry ends the scan (it and everything after it are not
// valid); only errors from reading the file or from fn are returned. Memory is bounded
// by MaxEntrySize whatever the file holds.
func (s *Store) scanLogFile(name string, fn func([]Record) error) (int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, fmt.Errorf("metadata: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("metadata: %w", err)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	var buf []byte
	var valid int64
	torn := func(why error) (int64, error) {
		s.log.Warn("metadata: log ends in a torn or corrupt entry", "file", name,
			"valid_bytes", valid, "dropped_bytes", st.Size()-valid, "err", why)
		return valid, nil
	}
	for {
		buf = slices.Grow(buf[:0], frameHeaderSize)[:frameHeaderSize]
		if _, err := io.ReadFull(r, buf); err != nil {
			if err == io.EOF {
				return valid, nil
			}
			if err == io.ErrUnexpectedEOF {
				return torn(err)
			}
			return 0, fmt.Errorf("metadata: %w", err)
		}
		n := int64(binary.BigEndian.Uint32(buf))
		if n > MaxEntrySize {
			return torn(fmt.Errorf("%w: entry length %d", ErrCorrupt, n))
		}
		if n > st.Size()-valid-frameHeaderSize {
			return torn(io.ErrUnexpectedEOF)
		}
		buf = slices.Grow(buf, int(n))[:frameHeaderSize+int(n)]
		if _, err := io.ReadFull(r, buf[frameHeaderSize:]); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return torn(err)
			}
			return 0, fmt.Errorf("metadata: %w", err)
		}
		recs, _, err := DecodeEntry(buf)
		if err != nil {
			return torn(err)
		}
		if err := fn(recs); err != nil {
			return 0, err
		}
		valid += int64(len(buf))
	}
}

func (s *Store) sync(f *os.File) error {
	if s.opts.noSync {
		return nil
	}
	return fdatasync(f)
}
