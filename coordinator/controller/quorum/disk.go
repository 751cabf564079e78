package quorum

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// DiskOptions configure a DiskStorage.
type DiskOptions struct {
	// FS is the file system (nil: the operating system's).
	FS vfs.FS
	// Logger receives recovery and compaction events (nil: discard).
	Logger *slog.Logger
	// NoSync skips every fdatasync: nothing is durable. Tests and fuzzing only.
	NoSync bool
	// LegacyImported says that the single-node metadata store this directory may
	// hold was read by ImportLegacyStore (LegacyImport.Found) and its records will
	// bootstrap the raft log. Without it a fresh raft directory holding such a store
	// is refused (ErrLegacyStore), so that its metadata is never silently ignored.
	LegacyImported bool
}

// DiskStorage is the Storage of a voter under metadata.log.dir: segments of the raft
// log and snapshot files (formats in the package doc). The whole retained log is
// also kept in memory (raft reads it on every Ready); its size is bounded by two
// snapshot intervals.
type DiskStorage struct {
	dir      string
	fs       vfs.FS
	log      *slog.Logger
	noSync   bool
	legacyOK bool

	mu struct {
		sync.Mutex
		l       logState
		seg     vfs.File // active segment (nil until bootstrapped)
		segBase uint64
		segSize int64    // valid length of the active segment
		segs    []uint64 // bases of the segments on disk, ascending, active last
		buf     []byte
		failed  error
		closed  bool
		unlock  func() error
	}
}

// OpenDiskStorage opens (creating if needed) the raft storage in dir and recovers
// it: the newest snapshot, then the segments. A torn tail of the last segment (a
// write a crash interrupted) is truncated and logged; anything else that fails its
// checksum or does not continue the log fails with ErrCorrupt, and nothing is
// repaired. A fresh directory yields an empty storage for Bootstrap.
func OpenDiskStorage(dir string, opts DiskOptions) (*DiskStorage, error) {
	d := &DiskStorage{dir: dir, fs: opts.FS, log: opts.Logger, noSync: opts.NoSync, legacyOK: opts.LegacyImported}
	if d.fs == nil {
		d.fs = vfs.Default
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if err := d.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("quorum: %w", err)
	}
	unlock, err := lockDir(d.fs, dir)
	if err != nil {
		return nil, err
	}
	d.mu.unlock = unlock
	d.mu.l = newLogState()
	if err := d.recover(); err != nil {
		d.closeLocked()
		return nil, err
	}
	return d, nil
}

// Dir returns the storage's directory.
func (d *DiskStorage) Dir() string { return d.dir }

func (d *DiskStorage) path(name string) string { return filepath.Join(d.dir, name) }

// listDir returns the bases of the segments and the indexes of the snapshots in the
// directory, ascending, and removes the temporary files of a snapshot or segment a
// crash interrupted.
func (d *DiskStorage) listDir() (segs, snaps []uint64, err error) {
	ents, err := d.fs.ReadDir(d.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("quorum: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, snapSuffix+tmpSuffix) || strings.HasSuffix(name, segSuffix+tmpSuffix) {
			_ = d.fs.Remove(d.path(name))
			continue
		}
		for _, kind := range []struct {
			suffix string
			dst    *[]uint64
		}{{segSuffix, &segs}, {snapSuffix, &snaps}} {
			stem, ok := strings.CutSuffix(name, kind.suffix)
			if !ok || len(stem) != 20 {
				continue
			}
			if v, err := strconv.ParseUint(stem, 10, 64); err == nil {
				*kind.dst = append(*kind.dst, v)
			}
		}
	}
	slices.Sort(segs)
	slices.Sort(snaps)
	return segs, snaps, nil
}

// recover rebuilds the in-memory log from the directory and opens the active
// segment. See the package doc, "Recovery".
func (d *DiskStorage) recover() error {
	segs, snaps, err := d.listDir()
	if err != nil {
		return err
	}
	if len(snaps) == 0 {
		if len(segs) == 0 {
			if legacy, err := legacyFiles(d.dir); err != nil {
				return err
			} else if len(legacy) > 0 && !d.legacyOK {
				return fmt.Errorf("%w: %s holds %s...; read it with ImportLegacyStore and open with DiskOptions.LegacyImported",
					ErrLegacyStore, d.dir, legacy[0])
			}
			return nil // fresh
		}
	}
	// A voter not yet added to a dynamic quorum has no snapshot until the leader
	// sends one; it may have saved a hard state (a term, a vote) before.
	snap, snapIndex := emptySnapshot(), uint64(0)
	if len(snaps) > 0 {
		snapIndex = snaps[len(snaps)-1]
		if snap, err = d.readSnapshot(snapIndex); err != nil {
			return err
		}
	}

	l := newLogState()
	var hs *raftpb.HardState
	started := false
	for i, base := range segs {
		last := i == len(segs)-1
		h, valid, err := d.replaySegment(base, last, func(h segHeader) error {
			switch {
			case !started:
			case h.reset:
				if h.base > snapIndex {
					return fmt.Errorf("%w: segment %d restarts the log after a snapshot that is missing (newest %d)", ErrCorrupt, h.base, snapIndex)
				}
			default:
				if t, err := l.term(h.base); err != nil || t != h.baseTerm {
					return fmt.Errorf("%w: segment %d (term %d) does not continue the log [%d, %d]", ErrCorrupt, h.base, h.baseTerm, l.firstIndex(), l.lastIndex())
				}
				return nil
			}
			l.base, l.baseTerm, l.ents = h.base, h.baseTerm, nil
			started = true
			return nil
		}, func(fhs *raftpb.HardState, ents []*raftpb.Entry) error {
			if err := l.checkAppend(ents); err != nil {
				return fmt.Errorf("%w: %v", ErrCorrupt, err)
			}
			l.appendEntries(ents)
			if fhs != nil {
				l.setHardState(fhs)
				hs = l.hs
			}
			return nil
		})
		if err != nil {
			return err
		}
		if last {
			d.mu.segBase, d.mu.segSize = h.base, valid
		}
	}

	// The snapshot must fall within the log with its term; if the log ends before
	// it or disagrees (a snapshot received from the leader whose new segment a crash
	// prevented), the log restarts after the snapshot.
	md := snap.GetMetadata()
	reset := false
	if t, err := l.term(md.GetIndex()); !started || err != nil || t != md.GetTerm() {
		if started && md.GetIndex() < l.base {
			return fmt.Errorf("%w: the log starts at %d, after the snapshot at %d", ErrCorrupt, l.firstIndex(), md.GetIndex())
		}
		reset = true
		l.base, l.baseTerm, l.ents = md.GetIndex(), md.GetTerm(), nil
	}
	l.snap = snap
	if hs == nil {
		if len(segs) > 0 || md.GetIndex() != 1 {
			return fmt.Errorf("%w: no hard state in the raft log", ErrCorrupt)
		}
		// Bootstrap wrote the snapshot and crashed before the first segment.
		hs = &raftpb.HardState{Term: proto.Uint64(md.GetTerm()), Commit: proto.Uint64(md.GetIndex())}
	}
	l.hs = hs
	if l.hs.GetCommit() < md.GetIndex() {
		// The snapshot holds applied, hence committed, entries; the commit index in
		// the log may lag behind it (commit-only hard states are not synced).
		l.hs = cloneHardState(hs)
		l.hs.Commit = proto.Uint64(md.GetIndex())
	}
	if l.hs.GetCommit() > l.lastIndex() {
		return fmt.Errorf("%w: commit index %d beyond the last entry %d: committed entries are missing", ErrCorrupt, l.hs.GetCommit(), l.lastIndex())
	}
	d.mu.l = l

	if reset || len(segs) == 0 {
		d.mu.segs = slices.DeleteFunc(segs, func(b uint64) bool { return b == l.base })
		if err := d.startSegmentLocked(segHeader{base: l.base, baseTerm: l.baseTerm, reset: true}, l.hs, nil); err != nil {
			return err
		}
		d.removeSegmentsLocked(func(base uint64) bool { return base != d.mu.segBase })
	} else {
		f, err := d.fs.OpenFile(d.path(segName(d.mu.segBase)), os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("quorum: %w", err)
		}
		d.mu.seg, d.mu.segs = f, segs
	}
	d.removeSnapshotsLocked(md.GetIndex())
	d.log.Info("raft storage recovered", "dir", d.dir, "snapshot", md.GetIndex(), "first", l.firstIndex(),
		"last", l.lastIndex(), "term", l.hs.GetTerm(), "commit", l.hs.GetCommit())
	return nil
}

// readSnapshot reads and checks the snapshot file at index.
func (d *DiskStorage) readSnapshot(index uint64) (*raftpb.Snapshot, error) {
	name := d.path(snapName(index))
	fi, err := d.fs.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("quorum: %w", err)
	}
	if fi.Size() > maxSnapshotFileSize {
		return nil, fmt.Errorf("%w: %s is %d bytes, limit %d", ErrCorrupt, name, fi.Size(), int64(maxSnapshotFileSize))
	}
	b, err := vfs.ReadFile(d.fs, name)
	if err != nil {
		return nil, fmt.Errorf("quorum: %w", err)
	}
	snap, err := decodeSnapshotFile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if snap.GetMetadata().GetIndex() != index {
		return nil, fmt.Errorf("%w: %s holds the snapshot at %d", ErrCorrupt, name, snap.GetMetadata().GetIndex())
	}
	return snap, nil
}

// writeSnapshotLocked writes snap's file: a temporary file, synced, renamed into
// place, the directory synced.
func (d *DiskStorage) writeSnapshotLocked(snap *raftpb.Snapshot) error {
	b := encodeSnapshotFile(snap)
	final := d.path(snapName(snap.GetMetadata().GetIndex()))
	tmp := final + tmpSuffix
	f, err := d.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("quorum: %w", err)
	}
	_, err = f.Write(b)
	if err == nil && !d.noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.fs.Rename(tmp, final)
	}
	if err == nil {
		err = d.syncDir()
	}
	if err != nil {
		_ = d.fs.Remove(tmp)
		return fmt.Errorf("quorum: snapshot %d: %w", snap.GetMetadata().GetIndex(), err)
	}
	return nil
}

func (d *DiskStorage) syncDir() error {
	if d.noSync {
		return nil
	}
	return d.fs.SyncDir(d.dir)
}

// startSegmentLocked creates the segment h.base holding one frame (hs and ents) and
// makes it the active segment. It is written under a temporary name, synced and
// renamed, so a segment never exists half written.
func (d *DiskStorage) startSegmentLocked(h segHeader, hs *raftpb.HardState, ents []*raftpb.Entry) error {
	buf := appendSegHeader(d.mu.buf[:0], h)
	buf = appendWriteFrame(buf, hs, ents)
	d.mu.buf = buf
	if len(buf)-segHeaderSize > maxFrameSize {
		return fmt.Errorf("%w: a write of %d bytes exceeds %d", ErrStorageFailed, len(buf), maxFrameSize)
	}
	if d.mu.seg != nil && !d.noSync {
		// Only the last segment may end in a torn write: make the old one's unsynced
		// tail (commit-only hard states) durable before another segment follows it.
		if err := d.mu.seg.Datasync(); err != nil {
			return fmt.Errorf("quorum: sync segment %d: %w", d.mu.segBase, err)
		}
	}
	final := d.path(segName(h.base))
	tmp := final + tmpSuffix
	f, err := d.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("quorum: %w", err)
	}
	_, err = f.WriteAt(buf, 0)
	if err == nil && !d.noSync {
		err = f.Datasync()
	}
	if err == nil {
		err = d.fs.Rename(tmp, final)
	}
	if err == nil {
		err = d.syncDir()
	}
	if err != nil {
		f.Close()
		_ = d.fs.Remove(tmp)
		return fmt.Errorf("quorum: new segment %d: %w", h.base, err)
	}
	if d.mu.seg != nil {
		if err := d.mu.seg.Close(); err != nil {
			d.log.Warn("raft storage: closing a full segment", "base", d.mu.segBase, "err", err)
		}
	}
	d.mu.seg, d.mu.segBase, d.mu.segSize = f, h.base, int64(len(buf))
	d.mu.segs = append(d.mu.segs, h.base)
	if cap(d.mu.buf) > 4<<20 {
		d.mu.buf = nil
	}
	return nil
}

// removeSegmentsLocked deletes the segments drop selects. Failures are logged: a
// stale segment costs space, never correctness (recovery skips what a snapshot
// covers).
func (d *DiskStorage) removeSegmentsLocked(drop func(base uint64) bool) {
	kept := d.mu.segs[:0]
	for _, base := range d.mu.segs {
		if !drop(base) {
			kept = append(kept, base)
			continue
		}
		if err := d.fs.Remove(d.path(segName(base))); err != nil && !vfs.IsNotExist(err) {
			d.log.Warn("raft storage: removing a compacted segment", "base", base, "err", err)
		}
	}
	d.mu.segs = kept
	// Segments found on disk but not tracked (a crash between creation and
	// removal) are removed by the next recovery's rule.
}

// removeSnapshotsLocked deletes snapshot files older than index.
func (d *DiskStorage) removeSnapshotsLocked(index uint64) {
	_, snaps, err := d.listDir()
	if err != nil {
		d.log.Warn("raft storage: listing for cleanup", "dir", d.dir, "err", err)
		return
	}
	for _, s := range snaps {
		if s < index {
			if err := d.fs.Remove(d.path(snapName(s))); err != nil && !vfs.IsNotExist(err) {
				d.log.Warn("raft storage: removing an old snapshot", "index", s, "err", err)
			}
		}
	}
}

func (d *DiskStorage) writableLocked() error {
	if d.mu.closed {
		return fmt.Errorf("%w: storage closed", ErrStorageFailed)
	}
	if d.mu.failed != nil {
		return fmt.Errorf("%w: %v", ErrStorageFailed, d.mu.failed)
	}
	return nil
}

func (d *DiskStorage) failLocked(err error) error {
	d.mu.failed = err
	if errors.Is(err, ErrStorageFailed) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrStorageFailed, err)
}

// InitialState implements raft.Storage.
func (d *DiskStorage) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return cloneHardState(d.mu.l.hs), cloneConfState(d.mu.l.snap.GetMetadata().GetConfState()), nil
}

// Entries implements raft.Storage.
func (d *DiskStorage) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.l.entries(lo, hi, maxSize)
}

// Term implements raft.Storage.
func (d *DiskStorage) Term(i uint64) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.l.term(i)
}

// LastIndex implements raft.Storage.
func (d *DiskStorage) LastIndex() (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.l.lastIndex(), nil
}

// FirstIndex implements raft.Storage.
func (d *DiskStorage) FirstIndex() (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.l.firstIndex(), nil
}

// Snapshot implements raft.Storage.
func (d *DiskStorage) Snapshot() (*raftpb.Snapshot, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.l.snap, nil
}

// Bootstrap implements Storage.
func (d *DiskStorage) Bootstrap(snap *raftpb.Snapshot) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.writableLocked(); err != nil {
		return err
	}
	if d.mu.seg != nil || d.mu.l.snap.GetMetadata().GetIndex() != 0 {
		return ErrNotEmpty
	}
	if err := checkBootstrap(snap); err != nil {
		return err
	}
	md := snap.GetMetadata()
	hs := &raftpb.HardState{Term: proto.Uint64(md.GetTerm()), Commit: proto.Uint64(md.GetIndex())}
	if err := d.writeSnapshotLocked(snap); err != nil {
		return d.failLocked(err)
	}
	if err := d.startSegmentLocked(segHeader{base: md.GetIndex(), baseTerm: md.GetTerm(), reset: true}, hs, nil); err != nil {
		return d.failLocked(err)
	}
	d.mu.l.applySnapshot(snap)
	d.mu.l.setHardState(hs)
	return nil
}

// Save implements Storage: one frame appended to the active segment, fdatasync'ed
// when sync.
func (d *DiskStorage) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.writableLocked(); err != nil {
		return err
	}
	if hs == nil && len(ents) == 0 {
		return nil
	}
	if err := d.mu.l.checkAppend(ents); err != nil {
		return d.failLocked(err)
	}
	if d.mu.seg == nil {
		// Not bootstrapped: a voter that waits to be added to a dynamic quorum
		// saves its hard state before the leader's snapshot arrives.
		if d.mu.l.snap.GetMetadata().GetIndex() != 0 {
			return d.failLocked(errors.New("save without an active segment"))
		}
		if err := d.startSegmentLocked(segHeader{base: 0, reset: true}, hs, ents); err != nil {
			return d.failLocked(err)
		}
		d.mu.l.setHardState(hs)
		d.mu.l.appendEntries(ents)
		return nil
	}
	buf := appendWriteFrame(d.mu.buf[:0], hs, ents)
	d.mu.buf = buf
	if len(buf) > maxFrameSize {
		return d.failLocked(fmt.Errorf("a write of %d bytes exceeds %d", len(buf), maxFrameSize))
	}
	f := d.mu.seg
	_, err := f.WriteAt(buf, d.mu.segSize)
	if err == nil && sync && !d.noSync {
		err = f.Datasync()
	}
	if err != nil {
		if terr := f.Truncate(d.mu.segSize); terr != nil {
			err = errors.Join(err, terr)
		}
		return d.failLocked(fmt.Errorf("append to %s: %w", f.Name(), err))
	}
	d.mu.segSize += int64(len(buf))
	d.mu.l.setHardState(hs)
	d.mu.l.appendEntries(ents)
	if cap(d.mu.buf) > 4<<20 {
		d.mu.buf = nil
	}
	return nil
}

// ApplySnapshot implements Storage: the snapshot file, then a new segment that
// restarts the log after it, then the old segments and snapshots are removed.
func (d *DiskStorage) ApplySnapshot(snap *raftpb.Snapshot) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.writableLocked(); err != nil {
		return err
	}
	md := snap.GetMetadata()
	if md.GetIndex() <= d.mu.l.snap.GetMetadata().GetIndex() {
		return fmt.Errorf("%w: snapshot at %d is not newer than the snapshot at %d", ErrStorageFailed,
			md.GetIndex(), d.mu.l.snap.GetMetadata().GetIndex())
	}
	if err := d.writeSnapshotLocked(snap); err != nil {
		return d.failLocked(err)
	}
	next := d.mu.l
	next.applySnapshot(snap)
	if err := d.startSegmentLocked(segHeader{base: md.GetIndex(), baseTerm: md.GetTerm(), reset: true}, next.hs, nil); err != nil {
		return d.failLocked(err)
	}
	d.mu.l = next
	d.removeSegmentsLocked(func(base uint64) bool { return base != md.GetIndex() })
	d.removeSnapshotsLocked(md.GetIndex())
	return nil
}

// CreateSnapshot implements Storage: the snapshot file, then a new segment holding
// the hard state and the entries after index, then what the previous snapshot
// covers is removed.
func (d *DiskStorage) CreateSnapshot(index uint64, cs *raftpb.ConfState, data []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.writableLocked(); err != nil {
		return err
	}
	if err := d.mu.l.checkSnapshot(index); err != nil {
		return fmt.Errorf("%w: %v", ErrStorageFailed, err)
	}
	next := d.mu.l
	next.createSnapshot(index, cs, data)
	if err := d.writeSnapshotLocked(next.snap); err != nil {
		return d.failLocked(err)
	}
	term := next.snap.GetMetadata().GetTerm()
	tail, _ := next.entries(index+1, next.lastIndex()+1, ^uint64(0))
	if err := d.startSegmentLocked(segHeader{base: index, baseTerm: term}, next.hs, tail); err != nil {
		return d.failLocked(err)
	}
	d.mu.l = next
	// A segment may go once the next one starts at or before the compaction point:
	// every entry it holds is then in the previous snapshot.
	compactTo := next.base
	segs := slices.Clone(d.mu.segs)
	d.removeSegmentsLocked(func(base uint64) bool {
		i, _ := slices.BinarySearch(segs, base)
		return i+1 < len(segs) && segs[i+1] <= compactTo
	})
	d.removeSnapshotsLocked(index)
	return nil
}

// Close implements Storage.
func (d *DiskStorage) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return nil
	}
	return d.closeLocked()
}

func (d *DiskStorage) closeLocked() error {
	d.mu.closed = true
	var errs []error
	if d.mu.seg != nil {
		errs = append(errs, d.mu.seg.Close())
		d.mu.seg = nil
	}
	if d.mu.unlock != nil {
		errs = append(errs, d.mu.unlock())
		d.mu.unlock = nil
	}
	return errors.Join(errs...)
}
