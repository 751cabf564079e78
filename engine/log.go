package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/samsa-broker/samsa/engine/vfs"
	"github.com/samsa-broker/samsa/internal/invariants"
)

// Log is one partition's log: an ordered list of segments, the last of which
// (the active segment) takes appends.
//
// Goroutines: any number may call Read, ReadCopy and the accessors; Append,
// truncation and retention serialise on appendMu. See the package doc for the
// lock order and the invariants.
type Log struct {
	tp     TopicPartition
	dir    string
	m      *Manager
	ld     *logDir
	fs     vfs.FS
	logger *slog.Logger
	cfg    atomic.Pointer[LogConfig]

	// segMu serialises the changes to the segment list other than appends
	// and rolls: retention, DeleteRecordsBefore, truncation, Close and
	// the cleaner's swap. Appends never wait for it.
	segMu sync.Mutex

	appendMu sync.Mutex
	prod     producerStates // under appendMu; prod.txns is &txns
	// snapAt is the offset of the producer snapshot on disk that holds
	// exactly prod (-1: none is known to). Under appendMu. A clean close
	// writes no snapshot when snapAt is the log end: Kafka's rule too
	// (ProducerStateManager takes one only past the last snapshot's offset).
	snapAt int64
	txns   txnTracker // open and unreplicated transactions (the LSO's bound)
	epochs *epochCache
	// recEpochs are the leader epochs the recovery scans of loadLog met, in
	// order (each with its first offset), assigned once the cache is loaded.
	recEpochs []epochEntry

	mu     sync.RWMutex
	segs   []*segment // sorted by base; never empty while open
	closed bool
	dmg    damages       // list under mu
	rec    RecoveryStats // what Open did to the log; written only while loading

	leo           atomic.Int64
	hw            atomic.Int64
	logStart      atomic.Int64
	recoveryPoint atomic.Int64 // everything below is fdatasynced and indexed
	size          atomic.Int64
	remoteEnd     atomic.Int64 // offsets below are copied to remote storage (SetRemoteEnd)
	dirtyBytes    atomic.Int64
	flushes       atomic.Int32 // consecutive small flushes, up to preallocAfter (prealloc.go)
	flushQueued   atomic.Bool
	dirDirty      atomic.Bool // a segment file was created since the last sync of dir

	// remoteStart is the whole log's start below the local one (tiered.go).
	remoteStart struct {
		sync.Mutex // serializes raises
		once       sync.Once
		off        atomic.Int64
	}

	flushMu sync.Mutex // one flush at a time

	// The cleaner's: firstDirty is the cleaner checkpoint (the first
	// offset not yet cleaned; -1 when unknown: the log start); cleanAbort
	// asks the pass in progress to stop; cstate is under Manager.cl.mu.
	firstDirty atomic.Int64
	cleanAbort atomic.Bool
	cstate     cleanState
}

// TopicPartition returns the log's partition.
func (l *Log) TopicPartition() TopicPartition { return l.tp }

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// LogStartOffset is the first offset readable.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LogEndOffset is the offset the next record will get.
func (l *Log) LogEndOffset() int64 { return l.leo.Load() }

// HighWatermark is the last value set by SetHighWatermark (clamped).
func (l *Log) HighWatermark() int64 { return l.hw.Load() }

// RecoveryPoint is the offset below which everything is fdatasynced.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// Size is the total size of the segment files in bytes.
func (l *Log) Size() int64 { return l.size.Load() }

// Config returns the log's configuration.
func (l *Log) Config() LogConfig { return *l.cfg.Load() }

// SetConfig replaces the configuration; it applies from the next append or
// retention check.
func (l *Log) SetConfig(cfg LogConfig) {
	c := cfg.sanitized()
	l.cfg.Store(&c)
}

// SetHighWatermark sets the high watermark, clamped to [log start, LEO]. It
// never moves backwards (truncation lowers it).
func (l *Log) SetHighWatermark(off int64) {
	for {
		cur := l.hw.Load()
		if ls := l.logStart.Load(); off < ls {
			off = ls
		}
		leo := l.leo.Load()
		if off > leo {
			off = leo
		}
		if off <= cur {
			return
		}
		if l.hw.CompareAndSwap(cur, off) {
			if invariants.Enabled {
				checkHighWatermark(l.tp, "set", off, leo)
			}
			return
		}
	}
}

// checkHWLocked panics (invariants builds) unless the high watermark lies at
// or below the log end offset; where names the change that set it. Caller
// holds appendMu (or loads the log), so that the log end does not move down
// meanwhile.
func (l *Log) checkHWLocked(where string) {
	checkHighWatermark(l.tp, where, l.hw.Load(), l.leo.Load())
}

// checkHighWatermark panics unless hw <= leo: the high watermark of tp, as
// where set it, against the log end offset it was set under.
func checkHighWatermark(tp TopicPartition, where string, hw, leo int64) {
	if hw > leo {
		panic(fmt.Sprintf("engine: invariant broken: high watermark <= log end offset: %s %s: high watermark %d, log end %d", tp, where, hw, leo))
	}
}

// LatestEpoch returns the latest leader epoch in the cache, -1 if none.
func (l *Log) LatestEpoch() int32 { return l.epochs.latest() }

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch <= epoch
// and the offset where the next epoch starts (LEO for the latest epoch), or
// (-1, -1) when unknown.
func (l *Log) EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64) {
	return l.epochs.endOffsetFor(epoch, l.leo.Load())
}

// AssignEpochStartOffset records that epoch starts at offset (a new leader,
// or a follower that learnt it).
func (l *Log) AssignEpochStartOffset(epoch int32, offset int64) error {
	if offset < 0 || offset > l.leo.Load() {
		return fmt.Errorf("%w: epoch %d start %d (log end %d)", ErrOffsetOutOfRange, epoch, offset, l.leo.Load())
	}
	_, err := l.epochs.assign(epoch, offset)
	return err
}

// ProducerState returns the known epoch and last sequence of a producer.
func (l *Log) ProducerState(pid int64) (epoch int16, lastSeq int32, ok bool) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	e := l.prod.m[pid]
	if e == nil {
		return 0, 0, false
	}
	lastSeq = -1
	if b := e.last(); b != nil {
		lastSeq = b.lastSeq
	}
	return e.epoch, lastSeq, true
}

// MaxTimestamp returns the largest record timestamp in the log and the
// offset of the first record that carries it (ListOffsets MAX_TIMESTAMP,
// KIP-734, as Kafka answers it since KAFKA-16310): the batch with the
// largest timestamp is decoded (decompressed, to at most 64 MiB) to find
// the record. When that batch cannot be decoded (too large, damaged, a
// control batch) its last offset is answered. (-1, -1) for an empty log.
func (l *Log) MaxTimestamp() (timestamp, offset int64) {
	segs := l.pinAll()
	defer releaseAll(segs)
	cfg := l.cfg.Load()
	timestamp, offset = -1, -1
	var in *segment
	for _, s := range segs {
		if s.maxTs.Load() == unknownTimestamp {
			if s.ensureIndexes(cfg) != nil {
				continue
			}
		}
		if ts := s.maxTs.Load(); ts > timestamp && s.size.Load() > 0 {
			timestamp, offset, in = ts, s.offMax.Load(), s
		}
	}
	if in != nil {
		if off, ok := in.offsetOfTimestamp(offset, timestamp, cfg); ok {
			offset = off
		}
	}
	return timestamp, offset
}

// offsetOfTimestamp finds the batch of s whose last offset is last and
// returns the offset of its first record with timestamp ts; ok is false
// when the batch is not found or cannot be decoded.
func (s *segment) offsetOfTimestamp(last, ts int64, cfg *LogConfig) (offset int64, ok bool) {
	sc := getScanner(s.log, s.size.Load())
	defer putScanner(sc)
	for pos := s.lookupPos(last, sc, cfg); pos < sc.limit; {
		h, err := sc.header(pos)
		if err != nil || h.BaseOffset > last {
			return 0, false
		}
		if h.LastOffset() < last {
			pos += h.Size()
			continue
		}
		if h.Control() || h.MaxTimestamp != ts || h.Size() > 64<<20 {
			return 0, false
		}
		b := make([]byte, h.Size())
		if _, err := s.log.ReadAt(b, pos); err != nil {
			return 0, false
		}
		found := errors.New("found")
		err = ForEachRecord(b, func(r Record) error {
			if r.Timestamp == ts {
				offset = r.Offset
				return found
			}
			return nil
		})
		return offset, err == found
	}
	return 0, false
}

// pinAll pins every segment.
func (l *Log) pinAll() []*segment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	segs := append([]*segment(nil), l.segs...)
	for _, s := range segs {
		s.pin()
	}
	return segs
}

func releaseAll(segs []*segment) {
	for _, s := range segs {
		s.release()
	}
}

// segmentForLocked returns the index of the segment holding offset: the last
// one with base <= offset (0 if offset is below them all).
func (l *Log) segmentForLocked(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	if i < 0 {
		i = 0
	}
	return i
}

// rollLocked closes the active segment to appends and starts a new one at
// base (the log end offset, or a follower's next batch). An empty active
// segment is replaced instead. The caller holds appendMu.
func (l *Log) rollLocked(base int64) error {
	cfg := l.cfg.Load()
	old := l.segs[len(l.segs)-1]
	if old.size.Load() == 0 && old.base == base {
		return nil
	}
	// A segment that is not active ends on disk where its data ends
	// (prealloc.go); the flush the roll queues makes the cut durable.
	if _, err := l.trimPreallocLocked(old); err != nil {
		return fmt.Errorf("roll %s at %d: cutting the blocks allocated ahead: %w", l.tp, base, err)
	}
	s, err := createSegment(l.m, l.dir, base, cfg, false)
	if err != nil {
		return fmt.Errorf("roll %s at %d: %w", l.tp, base, err)
	}
	l.dirDirty.Store(true)
	if old.size.Load() == 0 {
		// The empty segment is replaced. Should its file stay under its live
		// name (a failed rename and removal), it is an empty segment before
		// the new one, which recovery after a crash reads as a lost tail.
		if err := old.markDeleted(); err != nil {
			l.logger.Warn("replaced empty segment not removed", "base", old.base, "err", err)
		}
		l.mu.Lock()
		l.segs[len(l.segs)-1] = s
		l.mu.Unlock()
		l.m.scheduleDelete(old, 0)
		return nil
	}
	old.idxMu.Lock()
	old.forgetTailLocked()
	if old.tidx != nil && old.maxTs.Load() >= 0 {
		old.tidx.maybeAppendLocked(old.maxTs.Load(), old.offMax.Load())
	}
	terr := old.trimIndexesLocked()
	old.idxMu.Unlock()
	if terr != nil {
		l.logger.Warn("trim index on roll", "tp", l.tp, "err", terr)
	}
	if err := l.prod.writeSnapshot(l.fs, l.dir, base); err != nil {
		l.logger.Warn("producer snapshot", "tp", l.tp, "err", err)
	} else {
		l.snapAt = base
	}
	l.mu.Lock()
	l.segs = append(l.segs, s)
	l.mu.Unlock()
	l.ld.queueFlush(l)
	return nil
}

// closeMode says how a log is closed.
type closeMode int

const (
	closeClean  closeMode = iota // Manager.Close: sync, trim, snapshot
	closeDelete                  // DeleteLog: just release
	closeCrash                   // a simulated crash: leave the files as they are
)

// close releases every segment. A clean close fdatasyncs them, trims the
// active segment's indexes and writes a producer snapshot at the log end.
func (l *Log) close(mode closeMode) error {
	l.segMu.Lock()
	defer l.segMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	segs := l.segs
	l.segs = nil
	l.mu.Unlock()
	var first error
	if mode == closeCrash {
		for _, s := range segs {
			s.idxMu.Lock()
			if s.oidx != nil {
				s.oidx.writable, s.tidx.writable = false, false
			}
			s.idxMu.Unlock()
		}
	}
	if mode == closeClean {
		rp := l.recoveryPoint.Load()
		// Nothing unsynced (what the flusher checks too): an idle log's
		// close costs no fdatasync.
		synced := l.leo.Load() <= rp && l.dirtyBytes.Load() == 0
		// The active segment ends on disk where its data ends (prealloc.go);
		// the cut's new size is synced with it.
		if trimmed, err := l.trimPreallocLocked(segs[len(segs)-1]); err != nil {
			first = err
		} else if trimmed {
			synced = false
		}
		for _, s := range segs {
			last := s == segs[len(segs)-1]
			if s.next.Load() <= rp && !last {
				continue // synced when the recovery point passed it
			}
			if !last || !synced {
				if err := s.log.Datasync(); err != nil && first == nil {
					first = err
				}
			}
			if err := s.syncTxn(); err != nil && first == nil {
				first = err
			}
		}
		act := segs[len(segs)-1]
		act.idxMu.Lock()
		if act.tidx != nil {
			if act.maxTs.Load() >= 0 {
				act.tidx.maybeAppendLocked(act.maxTs.Load(), act.offMax.Load())
			}
			if err := act.trimIndexesLocked(); err != nil && first == nil {
				first = err
			}
			if err := act.oidx.fsyncIfDirtyLocked(); err != nil && first == nil {
				first = err
			}
			if err := act.tidx.fsyncIfDirtyLocked(); err != nil && first == nil {
				first = err
			}
		}
		act.idxMu.Unlock()
		if err := l.epochs.persistIfDirty(); err != nil && first == nil {
			first = err
		}
		leo := l.leo.Load()
		if l.needsSnapshot(leo, segs[0].base) {
			if err := l.prod.writeSnapshot(l.fs, l.dir, leo); err != nil && first == nil {
				first = err
			} else if err == nil {
				l.snapAt = leo
			}
		}
		if first == nil {
			l.recoveryPoint.Store(leo)
		}
	}
	l.dropPreallocLocked(segs[len(segs)-1]) // the directory's count; the file is as the mode left it
	releaseAll(segs)
	return first
}

// needsSnapshot says whether a clean close at log end leo must write the
// producer snapshot: not when the one on disk at leo holds the state, nor
// when the log holds nothing (leo is its first segment's base), the state
// is empty and no snapshot is at leo (opening it again rebuilds the same
// empty state from no records). An idle partition's close then costs no
// file write and no fsync. Caller holds appendMu.
func (l *Log) needsSnapshot(leo, firstBase int64) bool {
	if l.snapAt == leo {
		return false
	}
	if leo == firstBase && l.prod.empty() {
		if _, err := l.fs.Stat(snapshotPath(l.dir, leo)); errors.Is(err, os.ErrNotExist) {
			return false
		}
	}
	return true
}

func (l *Log) String() string { return fmt.Sprintf("Log(%s at %s)", l.tp, filepath.Base(l.dir)) }
