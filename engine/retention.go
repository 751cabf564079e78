package engine

import (
	"fmt"
	"math"

	"github.com/samsa-broker/samsa/internal/invariants"
)

// enforceRetention deletes the oldest segments that are wholly below the
// high watermark and either wholly below the log start offset, or (unless
// the log is compacted without cleanup.policy delete) older than
// retention.ms (by their largest timestamp) or beyond retention.bytes; with
// remote storage, local.retention.ms and local.retention.bytes, and only
// segments wholly copied to remote storage (SetRemoteEnd), unless
// remote.log.copy.disable stopped the copies. An
// expired, non-empty active segment is rolled first so it can go too.
// Deleted segments are renamed *.deleted and removed file.delete.delay.ms
// later, once no reader pins them. Producers silent for
// producer.id.expiration.ms (1 day) are forgotten.
func (l *Log) enforceRetention() (int, error) {
	l.segMu.Lock()
	defer l.segMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	cfg := l.cfg.Load()
	now := l.m.nowMs()
	if l.prod.expire(now) {
		l.snapAt = -1
	}
	hw := l.hw.Load()
	leo := l.leo.Load()
	logStart := l.logStart.Load()
	size := l.size.Load()
	retMs, retBytes := cfg.localRetention()
	n := 0
	for i := 0; i < len(l.segs); i++ {
		s := l.segs[i]
		last := i == len(l.segs)-1
		upper := leo
		if !last {
			upper = l.segs[i+1].base
		}
		if upper > hw {
			break
		}
		del := !last && upper <= logStart
		// With remote storage, only a segment wholly copied may go by age
		// or size (Kafka's UnifiedLog.deleteOldSegments with
		// remote.storage.enable), and never the active one.
		copied := !cfg.RemoteStorage || cfg.RemoteCopyDisable || (!last && upper <= l.remoteEnd.Load())
		if !del && cfg.deletes() && copied && retMs >= 0 && now-s.largestTimestamp(cfg) > retMs {
			del = true
		}
		if !del && cfg.deletes() && copied && retBytes >= 0 && size-s.size.Load() >= retBytes {
			del = true
		}
		if !del {
			break
		}
		if last {
			if s.size.Load() == 0 {
				break
			}
			if err := l.rollLocked(leo); err != nil {
				return 0, err
			}
		}
		size -= s.size.Load()
		n++
	}
	return n, l.deleteOldestLocked(n, cfg)
}

// deleteOldestLocked removes the first n segments (never the active one) and
// raises the log start offset to the new first segment. Caller holds appendMu.
func (l *Log) deleteOldestLocked(n int, cfg *LogConfig) error {
	if n == 0 {
		return nil
	}
	l.mu.Lock()
	if n >= len(l.segs) {
		l.mu.Unlock()
		return fmt.Errorf("%w: deleting every segment", ErrInvalidConfig)
	}
	gone := append([]*segment(nil), l.segs[:n]...)
	l.segs = append(l.segs[:0:0], l.segs[n:]...)
	l.pruneDamageLocked()
	first := l.segs[0].base
	if l.logStart.Load() < first {
		l.logStart.Store(first)
	}
	if l.hw.Load() < first {
		l.hw.Store(first)
	}
	if invariants.Enabled {
		l.checkHWLocked("segment deletion")
	}
	l.mu.Unlock()
	var err error
	for _, s := range gone {
		l.size.Add(-s.size.Load())
		if e := s.markDeleted(); e != nil && err == nil {
			err = e
		}
		l.logger.Info("deleted segment", "base", s.base, "size", s.size.Load())
		l.m.scheduleDelete(s, cfg.FileDeleteDelayMs)
	}
	if e := l.epochs.truncateFromStart(l.logStart.Load()); e != nil && err == nil {
		err = e
	}
	removeSnapshots(l.fs, l.dir, first, math.MaxInt64)
	if l.snapAt < first {
		l.snapAt = -1
	}
	return err
}

// DeleteRecordsBefore raises the log start offset to offset (DeleteRecords)
// and deletes the segments wholly below it. offset must not exceed the high
// watermark. It returns the new log start offset.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	l.segMu.Lock()
	defer l.segMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	if offset > l.hw.Load() || offset < 0 {
		return l.logStart.Load(), fmt.Errorf("%w: delete before %d, high watermark %d", ErrOffsetOutOfRange, offset, l.hw.Load())
	}
	if offset <= l.logStart.Load() {
		return l.logStart.Load(), nil
	}
	l.mu.Lock()
	l.logStart.Store(offset)
	n := 0
	for n+1 < len(l.segs) && l.segs[n+1].base <= offset {
		n++
	}
	l.mu.Unlock()
	err := l.deleteOldestLocked(n, l.cfg.Load())
	if e := l.epochs.truncateFromStart(offset); e != nil && err == nil {
		err = e
	}
	if e := l.m.writeDirCheckpoints(l.ld); e != nil && err == nil {
		err = e
	}
	return offset, err
}
