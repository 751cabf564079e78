package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// What tiered storage (KIP-405) needs of a log: its sealed segments' files to
// copy, the leader epochs, and how far the copies reach, which local
// retention respects (retention.go).

// SealedSegment is a segment that takes no more appends (not the active
// one), as tiered storage's copy reads it.
type SealedSegment struct {
	Base         int64 // its first offset
	Next         int64 // the offset after its last: the next segment's base
	Size         int64 // bytes of its .log file
	MaxTimestamp int64 // its largest batch timestamp (ms)
	// Paths of its files. TxnIndex is "" when it has no aborted
	// transaction; ProducerSnapshot is the producer snapshot at Next, ""
	// when none is on disk (a log reopened after a crash keeps fewer).
	Log, OffsetIndex, TimeIndex, TxnIndex, ProducerSnapshot string
}

// SealedSegments returns the sealed segments whose offsets are all below
// upTo, oldest first. Their files may be deleted by retention afterwards;
// a reader of them fails then, and tries again later.
func (l *Log) SealedSegments(upTo int64) []SealedSegment {
	cfg := l.cfg.Load()
	l.mu.RLock()
	segs := append([]*segment(nil), l.segs...)
	l.mu.RUnlock()
	var out []SealedSegment
	for i := 0; i+1 < len(segs); i++ {
		s, next := segs[i], segs[i+1].base
		if next > upTo {
			break
		}
		if s.size.Load() == 0 {
			continue
		}
		ss := SealedSegment{Base: s.base, Next: next, Size: s.size.Load(), MaxTimestamp: s.largestTimestamp(cfg),
			Log: s.path(logSuffix), OffsetIndex: s.path(indexSuffix), TimeIndex: s.path(timeIndexSuffix)}
		if _, err := l.fs.Stat(s.path(txnIndexSuffix)); err == nil {
			ss.TxnIndex = s.path(txnIndexSuffix)
		}
		if _, err := l.fs.Stat(snapshotPath(l.dir, next)); err == nil {
			ss.ProducerSnapshot = snapshotPath(l.dir, next)
		}
		out = append(out, ss)
	}
	return out
}

// EpochStart is one entry of the leader-epoch cache: the first offset
// written in a leader epoch.
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}

// LeaderEpochs returns the leader-epoch cache's entries, oldest first.
func (l *Log) LeaderEpochs() []EpochStart {
	l.epochs.mu.RLock()
	defer l.epochs.mu.RUnlock()
	out := make([]EpochStart, len(l.epochs.entries))
	for i, e := range l.epochs.entries {
		out[i] = EpochStart{e.epoch, e.start}
	}
	return out
}

// EpochsIn returns the leader epochs of the records in [from, to) with
// the first offset of each in that range (Kafka's
// LeaderEpochFileCache.epochEntriesInRange), from epochs as LeaderEpochs
// returns them.
func EpochsIn(epochs []EpochStart, from, to int64) []EpochStart {
	var out []EpochStart
	for i, e := range epochs {
		end := int64(-1)
		if i+1 < len(epochs) {
			end = epochs[i+1].StartOffset
		}
		if e.StartOffset >= to || (end >= 0 && end <= from) {
			continue
		}
		out = append(out, EpochStart{e.Epoch, max(e.StartOffset, from)})
	}
	return out
}

// EncodeEpochCheckpoint writes entries in the leader-epoch-checkpoint
// file's format (version 0, the count, "epoch offset" per line).
func EncodeEpochCheckpoint(entries []EpochStart) []byte {
	b := []byte("0\n" + strconv.Itoa(len(entries)) + "\n")
	for _, e := range entries {
		b = strconv.AppendInt(b, int64(e.Epoch), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.StartOffset, 10)
		b = append(b, '\n')
	}
	return b
}

// SetRemoteEnd records that every offset below end is copied to remote
// storage (Kafka's highestOffsetInRemoteStorage + 1). With
// LogConfig.RemoteStorage, local retention deletes only segments wholly
// below it. It only moves forward.
func (l *Log) SetRemoteEnd(end int64) {
	for {
		cur := l.remoteEnd.Load()
		if end <= cur || l.remoteEnd.CompareAndSwap(cur, end) {
			return
		}
	}
}

// RemoteEnd is what SetRemoteEnd last recorded (0: nothing).
func (l *Log) RemoteEnd() int64 { return l.remoteEnd.Load() }

// EnforceRetention applies retention now (as the background check does
// every log.retention.check.interval.ms) and returns the number of
// segments deleted.
func (l *Log) EnforceRetention() (int, error) { return l.enforceRetention() }

// TimestampInBatch answers OffsetForTimestamp within one whole batch b
// whose largest timestamp is at least ts (a batch read from remote
// storage): the first record with a timestamp >= ts; in a compressed or
// LogAppendTime batch, its base offset and largest timestamp, as
// OffsetForTimestamp answers.
func TimestampInBatch(b []byte, ts int64) (offset, timestamp int64, err error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return 0, 0, err
	}
	if int64(len(b)) < h.Size() {
		return 0, 0, fmt.Errorf("%w: a batch of %d bytes cut at %d", ErrCorrupt, h.Size(), len(b))
	}
	off, t := h.BaseOffset, h.MaxTimestamp
	if h.Compression() != 0 || h.LogAppendTimeType() {
		return off, t, nil
	}
	err = recordTimestamps(b[:h.Size()], func(o, rts int64) bool {
		if rts >= ts {
			off, t = o, rts
			return false
		}
		return true
	})
	if err != nil {
		return h.BaseOffset, h.MaxTimestamp, nil
	}
	return off, t, nil
}

// remoteLogStartFile holds a tiered log's whole-log start when DeleteRecords
// raised it (RaiseRemoteLogStart): a decimal offset and a newline.
const remoteLogStartFile = "remote-log-start-offset"

// RaiseRemoteLogStart records that no offset below off may be read any more,
// in remote storage either: DeleteRecords on a tiered log (Kafka's
// logStartOffset, beside the local log start this log's LogStartOffset is).
// It is kept in the log's directory, written atomically, and only rises.
func (l *Log) RaiseRemoteLogStart(off int64) error {
	rs := &l.remoteStart
	rs.Lock()
	defer rs.Unlock()
	if off <= l.RemoteLogStart() {
		return nil
	}
	if err := writeFileAtomic(l.fs, filepath.Join(l.dir, remoteLogStartFile), []byte(strconv.FormatInt(off, 10)+"\n")); err != nil {
		return fmt.Errorf("%s: remote log start %d: %w", l.tp, off, err)
	}
	rs.off.Store(off)
	return nil
}

// RemoteLogStart is what RaiseRemoteLogStart last recorded (0: never).
func (l *Log) RemoteLogStart() int64 {
	rs := &l.remoteStart
	rs.once.Do(func() {
		b, err := vfs.ReadFile(l.fs, filepath.Join(l.dir, remoteLogStartFile))
		if err != nil {
			return
		}
		if off, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && off > 0 {
			rs.off.Store(off)
		}
	})
	return rs.off.Load()
}

// ErrNotEmpty: restoring a tiered log's state into a log that holds records.
var ErrNotEmpty = errors.New("engine: the log is not empty")

// RestoreProducerSnapshot gives an empty log the producer state of snapshot
// (a producer snapshot as the engine writes them): a follower that started
// over at its leader's local log start, the records below it in remote
// storage, takes the state as of that offset from the copy before it
// (Kafka's buildRemoteLogAuxState), so that it deduplicates and fences the
// producers that wrote there as the leader does. The snapshot is kept at
// the log start, as one written by a roll there.
func (l *Log) RestoreProducerSnapshot(snapshot []byte) error {
	l.segMu.Lock()
	defer l.segMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	start, leo := l.logStart.Load(), l.leo.Load()
	if start != leo {
		return fmt.Errorf("%w: %s holds [%d, %d)", ErrNotEmpty, l.tp, start, leo)
	}
	if _, err := decodeSnapshot(snapshot); err != nil {
		return fmt.Errorf("%s: producer snapshot at %d: %w", l.tp, leo, err)
	}
	if err := writeFileAtomic(l.fs, snapshotPath(l.dir, leo), snapshot); err != nil {
		return fmt.Errorf("%s: producer snapshot at %d: %w", l.tp, leo, err)
	}
	return l.rebuildProducerState(leo, leo)
}
