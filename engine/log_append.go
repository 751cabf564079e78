package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/samsa-broker/samsa/internal/invariants"
)

// AppendOptions qualifies one Append.
type AppendOptions struct {
	LeaderEpoch int32 // stamped into every batch (leader appends)
	Now         int64 // unix ms for LogAppendTime; 0 = the manager's clock
	Follower    bool  // replication: keep the offsets and epochs in the batches
	// Hold, when set, defers the flusher's wake-up for this append to
	// Hold.Release (the fsync policy's group commit of a multi-partition request).
	Hold *FlushHold
}

// AppendResult describes what Append wrote.
type AppendResult struct {
	BaseOffset, LastOffset int64
	LogAppendTime          int64 // -1 unless the log uses LogAppendTime
	LogStartOffset         int64
	Duplicate              bool // idempotent retry: the offsets of the original write; nothing written
}

// Append validates batches (one or more v2 batches, concatenated), stamps the
// base offsets and the leader epoch in place, and writes them to the active
// segment with one positioned write. It is safe for concurrent callers and
// does not wait for durability (see WaitDurable). On error the log is
// unchanged (the caller's bytes may have been stamped). A follower append
// keeps the batches' offsets and epochs, skips the idempotence checks and,
// as in Kafka, is not held to max.message.bytes.
//
// In steady state it allocates nothing.
func (l *Log) Append(batches []byte, o AppendOptions) (AppendResult, error) {
	res, err := l.append(batches, o)
	if err != nil && errors.Is(err, ErrNoSpace) {
		l.ld.noteNoSpace()
	}
	return res, err
}

// append is Append without the bookkeeping of a full disk. Its phases, in
// order (each below, with what it may change):
//
//  1. validateAppend: the batches' framing and sizes; no lock, nothing changed.
//  2. under appendMu: the log open and its directory online.
//  3. checkProducersLocked (leader appends): idempotence and transactions;
//     a retry of a batch already written answers with its first write's
//     offsets.
//  4. assignOffsets: offsets from the log end, stamped in place for a
//     leader (with the epoch and LogAppendTime), kept for a follower.
//  5. segmentForAppendLocked: the active segment, or a new one rolled.
//  6. prepareIndexesLocked: the segment's index files, and room for the
//     entries this append may add.
//  7. writeLocked: one positioned write past the segment's published size.
//  8. applyProducers: producer state and the transaction index.
//  9. publishAppendLocked: the segment's size, then the log end offset
//     (package doc, invariant 1).
//  10. addIndexEntries: the index entries, after the bytes they point at.
//  11. noteEpochsLocked: the leader epochs the batches start.
//  12. scheduleFlush: the flusher, as the sync policy wants it.
//
// An error in phases 1 to 6 leaves the log's records as they were (the
// caller's bytes may be stamped, a segment rolled); one in phases 7 and 8 is
// undone (undoWrite, undoTxnWrite).
func (l *Log) append(batches []byte, o AppendOptions) (AppendResult, error) {
	cfg := l.cfg.Load()
	nb, err := validateAppend(batches, o.Follower, cfg)
	if err != nil {
		return AppendResult{}, err
	}

	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.appendableLocked(); err != nil {
		return AppendResult{}, err
	}
	now := o.Now
	if now == 0 {
		now = l.m.nowMs()
	}
	leo := l.leo.Load()
	if !o.Follower {
		dup, err := l.checkProducersLocked(batches, nb)
		if err != nil {
			return AppendResult{}, err
		}
		if dup != nil {
			return AppendResult{BaseOffset: dup.firstOffset, LastOffset: dup.lastOffs, LogAppendTime: -1,
				LogStartOffset: l.logStart.Load(), Duplicate: true}, nil
		}
	}
	first, next, err := assignOffsets(batches, o.Follower, o.LeaderEpoch, cfg.TimestampType, now, leo)
	if err != nil {
		return AppendResult{}, err
	}
	if invariants.Enabled {
		checkAppendOffsets(batches, o.Follower, leo, first, next)
	}
	seg, err := l.segmentForAppendLocked(cfg, len(batches), nb, first, next, leo, now, o.Follower)
	if err != nil {
		return AppendResult{}, err
	}
	interval := int64(cfg.IndexIntervalBytes)
	if err := l.prepareIndexesLocked(seg, batches, interval); err != nil {
		return AppendResult{}, err
	}
	pos, err := l.writeLocked(seg, batches, now)
	if err != nil {
		return AppendResult{}, err
	}
	if err := l.applyProducers(seg, batches); err != nil {
		return AppendResult{}, l.undoTxnWrite(seg, pos, err)
	}
	l.publishAppendLocked(seg, pos, int64(len(batches)), next, cfg)
	seg.addIndexEntries(batches, pos, interval)
	l.noteEpochsLocked(batches)
	l.scheduleFlush(int64(len(batches)), o.Hold)

	res := AppendResult{BaseOffset: first, LastOffset: next - 1, LogAppendTime: -1, LogStartOffset: l.logStart.Load()}
	if cfg.TimestampType == LogAppendTime && !o.Follower {
		res.LogAppendTime = now
	}
	return res, nil
}

// validateAppend checks the batches of an append (one or more, concatenated)
// and returns how many there are: each batch's framing and header
// (ValidateBatch for a leader's; for a follower's, the rules of a stored
// batch, since a compacted leader sends batches with holes, or emptied),
// max.message.bytes per batch (leader appends only) and segment.bytes for
// the whole append. It reads only.
func validateAppend(batches []byte, follower bool, cfg *LogConfig) (int, error) {
	nb := 0
	for p := 0; p < len(batches); nb++ {
		var h BatchHeader
		var err error
		if follower {
			h, err = validateStoredBatch(batches[p:])
		} else {
			h, err = ValidateBatch(batches[p:])
		}
		if err != nil {
			return 0, err
		}
		if h.Size() > int64(cfg.MaxMessageBytes) && !follower {
			return 0, fmt.Errorf("%w: batch of %d bytes, max.message.bytes %d", ErrBatchTooLarge, h.Size(), cfg.MaxMessageBytes)
		}
		p += int(h.Size())
	}
	if nb == 0 {
		return 0, fmt.Errorf("%w: no batch", ErrCorruptBatch)
	}
	if int64(len(batches)) > cfg.SegmentBytes {
		return 0, fmt.Errorf("%w: %d bytes, segment.bytes %d", ErrBatchTooLarge, len(batches), cfg.SegmentBytes)
	}
	return nb, nil
}

// appendableLocked is nil when the log takes appends: it is open and its
// directory online. Caller holds appendMu.
func (l *Log) appendableLocked() error {
	if l.closed {
		return ErrClosed
	}
	return l.ld.offlineErr()
}

// checkProducersLocked holds the nb batches of a leader append to the
// producer state before anything is changed: a control batch to the rules
// of a coordinator's marker (checkLeaderMarker), a producer's data batch to
// the idempotence and transaction rules (producerStates.check). A retry of
// a batch already written comes back as dup (the first write's offsets:
// nothing is to be written), and fails inside a multi-batch append. Caller
// holds appendMu.
func (l *Log) checkProducersLocked(batches []byte, nb int) (dup *batchMeta, err error) {
	var sc seqCheck
	rules := checkRules{verify: !l.m.noVerify.Load()}
	for p := 0; p < len(batches); {
		h := parseHeaderUnchecked(batches[p:])
		if h.Control() {
			if err := l.checkLeaderMarker(&h, batches[p:p+int(h.Size())]); err != nil {
				return nil, err
			}
			sc = seqCheck{}
		} else if h.ProducerID >= 0 {
			dup, err := l.prod.check(&h, &sc, rules)
			if err != nil {
				return nil, err
			}
			if dup != nil {
				if nb > 1 {
					return nil, fmt.Errorf("%w: duplicate batch inside a multi-batch append", ErrOutOfOrderSequence)
				}
				return dup, nil
			}
		}
		p += int(h.Size())
	}
	return nil, nil
}

// assignOffsets gives validated batches their offsets and returns the first
// offset and the one after the last batch. A leader append (follower false)
// stamps them in place from the log end leo on, dense (each batch's base is
// the previous batch's end), with the leader epoch and, under
// LogAppendTime, the time now. A follower append keeps the leader's offsets
// and epochs, which must not lie below the previous batch's end (from leo
// on; holes are a compacted leader's): ErrUnexpectedAppendOffset. Caller
// holds appendMu.
func assignOffsets(batches []byte, follower bool, epoch int32, ts TimestampType, now, leo int64) (first, next int64, err error) {
	first, next = leo, leo
	for p := 0; p < len(batches); {
		size := int(int64(int32(beUint32(batches[p+offLength:]))) + logOverhead)
		delta := int64(int32(beUint32(batches[p+offLastOffsetDelta:])))
		if follower {
			base := int64(beUint64(batches[p:]))
			if base < next {
				return 0, 0, fmt.Errorf("%w: batch at %d, log end %d", ErrUnexpectedAppendOffset, base, next)
			}
			if p == 0 {
				first = base
			}
			next = base + delta + 1
		} else {
			stampBatch(batches[p:], next, epoch)
			if ts == LogAppendTime {
				stampLogAppendTime(batches[p:p+size], now)
			}
			next += delta + 1
		}
		p += size
	}
	return first, next, nil
}

// checkAppendOffsets panics unless the offsets assignOffsets gave the
// batches are what the log may take (invariants builds only): the first
// batch at the log end leo (a follower's: at or past it), each next one at
// the end of the one before (a follower's: at or past it), each batch's
// last offset at or past its base, and next the end of the last.
func checkAppendOffsets(batches []byte, follower bool, leo, first, next int64) {
	end := leo
	for p := 0; p < len(batches); {
		h := parseHeaderUnchecked(batches[p:])
		if h.BaseOffset != end && (!follower || h.BaseOffset < end) {
			panic(fmt.Sprintf("engine: invariant broken: offsets of an append dense and increasing: batch at %d after end %d (log end %d, follower %t)",
				h.BaseOffset, end, leo, follower))
		}
		if p == 0 && h.BaseOffset != first {
			panic(fmt.Sprintf("engine: invariant broken: offsets of an append dense and increasing: first batch at %d, append's first offset %d", h.BaseOffset, first))
		}
		if h.LastOffset() < h.BaseOffset {
			panic(fmt.Sprintf("engine: invariant broken: offsets of an append dense and increasing: batch at %d ends at %d", h.BaseOffset, h.LastOffset()))
		}
		end = h.LastOffset() + 1
		p += int(h.Size())
	}
	if end != next {
		panic(fmt.Sprintf("engine: invariant broken: offsets of an append dense and increasing: batches end at %d, append's end %d", end, next))
	}
}

// segmentForAppendLocked returns the segment the batches [first, next) go to
// (n bytes in nb batches): the active segment, or a new one when needRoll
// says so. A follower's batch may start past the log end leo (the leader's
// log is compacted): the new segment starts at the log end all the same, so
// that segments stay contiguous in offsets (recovery reads a gap between
// segments as a lost tail), unless the batch would then lie beyond the
// segment's 2^31 offsets. Caller holds appendMu.
func (l *Log) segmentForAppendLocked(cfg *LogConfig, n, nb int, first, next, leo, now int64, follower bool) (*segment, error) {
	seg := l.segs[len(l.segs)-1]
	if !l.needRoll(seg, cfg, n, nb, first, next-1, now) {
		return seg, nil
	}
	rollAt := first
	if follower && first > leo && next-1-leo <= math.MaxInt32 {
		rollAt = leo
	}
	if err := l.rollLocked(rollAt); err != nil {
		l.m.reportIO(l.tp.String(), err, "op", "roll")
		return nil, ioFailure(fmt.Sprintf("append %s", l.tp), err)
	}
	seg = l.segs[len(l.segs)-1]
	if next-1-seg.base > math.MaxInt32 {
		return nil, fmt.Errorf("%w: offsets %d..%d span more than a segment", ErrInvalidRecord, first, next-1)
	}
	return seg, nil
}

// prepareIndexesLocked readies seg's indexes for the append of batches,
// before anything is written: it creates the index files of a segment
// about to take its first batch, and makes room for the entries the append
// may add (one per batch, and the time index's entry at roll or close), so
// that a full disk fails the growth of an index, not the append half-way.
// Caller holds appendMu; it takes seg.idxMu.
func (l *Log) prepareIndexesLocked(seg *segment, batches []byte, interval int64) error {
	if seg.idxLazy.Load() {
		if ierr := seg.createIndexFiles(); ierr != nil {
			l.m.reportIO(l.tp.String(), ierr, "op", "index create")
			return ioFailure(fmt.Sprintf("append %s", l.tp), ierr)
		}
	}
	if n := indexEntriesFor(batches, seg.bytesSinceIndex, interval); n > 0 {
		seg.idxMu.Lock()
		ierr := seg.oidx.reserveLocked(n)
		if ierr == nil {
			ierr = seg.tidx.reserveLocked(n + 1)
		}
		seg.idxMu.Unlock()
		if ierr != nil {
			l.m.reportIO(l.tp.String(), ierr, "op", "index grow")
			return ioFailure(fmt.Sprintf("append %s", l.tp), ierr)
		}
	}
	return nil
}

// writeLocked writes batches past seg's published size with one positioned
// write and returns the position it wrote at; a failed write is undone
// (undoWrite). The segment's roll clock starts with its first append.
// Caller holds appendMu.
func (l *Log) writeLocked(seg *segment, batches []byte, now int64) (int64, error) {
	pos := seg.size.Load()
	if _, err := seg.log.WriteAt(batches, pos); err != nil {
		return 0, l.undoWrite(seg, pos, err)
	}
	if seg.rollAtMs == 0 {
		seg.rollAtMs = now
	}
	return pos, nil
}

// publishAppendLocked makes the n bytes written at pos in seg, whose batches
// end at offset next, the log's: the blocks they took from the preallocated
// tail, then the segment's size, then the log end offset (package doc,
// invariant 1), then more blocks ahead if the policy wants them. It runs
// after applyProducers, so that a flush that reads the new end finds the
// index entries of its markers written, and syncs them with the data.
// Caller holds appendMu.
func (l *Log) publishAppendLocked(seg *segment, pos, n, next int64, cfg *LogConfig) {
	end := pos + n
	l.consumePreallocLocked(seg, pos, end)
	seg.size.Store(end)
	seg.next.Store(next)
	l.size.Add(n)
	l.leo.Store(next)
	if perr := l.preallocLocked(seg, end, cfg); perr != nil {
		// The blocks allocated ahead could not be cut off after a failed
		// allocation of more: nothing more goes into this directory (Open cuts
		// them after the restart, as any tail past the last batch).
		l.m.reportIO(l.tp.String(), perr, "op", "truncate")
		l.ld.setOffline(perr)
	}
}

// addIndexEntries adds the index entries of batches just published at pos
// in the segment: its largest timestamp, the tail ring, and an offset- and
// time-index entry each time more than interval bytes were written since
// the last (room made by prepareIndexesLocked). Called with appendMu held,
// after the new size is published; it takes idxMu.
func (s *segment) addIndexEntries(batches []byte, pos, interval int64) {
	s.idxMu.Lock()
	for p := 0; p < len(batches); {
		h := parseHeaderUnchecked(batches[p:])
		if h.MaxTimestamp > s.maxTs.Load() {
			s.offMax.Store(h.LastOffset())
			s.maxTs.Store(h.MaxTimestamp)
		}
		s.recordTailLocked(h, pos+int64(p))
		if s.bytesSinceIndex > interval {
			s.oidx.appendEntryLocked(h.LastOffset(), pos+int64(p))
			s.tidx.maybeAppendLocked(s.maxTs.Load(), s.offMax.Load())
			s.bytesSinceIndex = 0
		}
		s.bytesSinceIndex += h.Size()
		p += int(h.Size())
	}
	s.idxMu.Unlock()
}

// noteEpochsLocked adds to the leader-epoch cache each epoch that a batch of
// batches starts (later than the latest known); the next flush writes the
// checkpoint. Caller holds appendMu.
func (l *Log) noteEpochsLocked(batches []byte) {
	latest := l.epochs.latest()
	for p := 0; p < len(batches); {
		h := parseHeaderUnchecked(batches[p:])
		if h.PartitionLeaderEpoch > latest {
			l.epochs.assignLater(h.PartitionLeaderEpoch, h.BaseOffset) // written by the next flush
			latest = h.PartitionLeaderEpoch
		}
		p += int(h.Size())
	}
}

// scheduleFlush counts n bytes appended as dirty and queues the log for the
// flusher as the sync policy wants: every append under fsync (its wake-up
// deferred to hold, when set), once FlushBytes are dirty under interval.
func (l *Log) scheduleFlush(n int64, hold *FlushHold) {
	dirty := l.dirtyBytes.Add(n)
	switch l.m.opts.Sync {
	case SyncFsync:
		l.ld.queueFlushHeld(l, hold)
	case SyncInterval:
		if fb := l.m.opts.FlushBytes; fb > 0 && dirty >= fb {
			l.ld.queueFlushHeld(l, hold)
		}
	}
}

// indexEntriesFor is the number of offset-index entries an append of
// batches adds to a segment bytesSinceIndex past its last entry (the rule
// of the loop that adds them).
func indexEntriesFor(batches []byte, bytesSinceIndex, interval int64) int {
	n := 0
	for p := 0; p < len(batches); {
		if bytesSinceIndex > interval {
			n++
			bytesSinceIndex = 0
		}
		size := int64(int32(beUint32(batches[p+offLength:]))) + logOverhead
		bytesSinceIndex += size
		p += int(size)
	}
	return n
}

// needRoll reports whether an append of n bytes in nb batches with offsets
// [first, last] must go to a new segment.
func (l *Log) needRoll(seg *segment, cfg *LogConfig, n, nb int, first, last, now int64) bool {
	size := seg.size.Load()
	if size == 0 {
		return first-seg.base > math.MaxInt32 || last-seg.base > math.MaxInt32 || first < seg.base
	}
	if size+int64(n) > cfg.SegmentBytes {
		return true
	}
	if seg.rollAtMs != 0 && now-seg.rollAtMs > cfg.rollMs() {
		return true
	}
	if last-seg.base > math.MaxInt32 {
		return true
	}
	seg.idxMu.RLock()
	full := seg.oidx.fullFor(nb) || seg.tidx.fullFor(nb+1)
	seg.idxMu.RUnlock()
	return full
}

// WaitDurable blocks until every offset <= offset is fdatasynced (group
// commit). Under the interval and none policies it returns at once.
func (l *Log) WaitDurable(offset int64) error {
	if l.m.opts.Sync != SyncFsync || l.recoveryPoint.Load() > offset {
		return nil
	}
	w := getWaiter()
	w.l, w.offset = l, offset
	l.ld.addWaiter(w)
	err := <-w.ch
	putWaiter(w)
	return err
}

// OnDurable is the asynchronous WaitDurable: done runs on the flusher's
// goroutine once offset is durable (inline if it already is, or if the policy
// does not wait). done must not block.
func (l *Log) OnDurable(offset int64, done func(error)) { l.OnDurableHeld(offset, nil, done) }

// OnDurableHeld is OnDurable whose wake-up of the flusher is left to h.Release
// (h nil: at once); see FlushHold.
func (l *Log) OnDurableHeld(offset int64, h *FlushHold, done func(error)) {
	if l.m.opts.Sync != SyncFsync || l.recoveryPoint.Load() > offset {
		done(nil)
		return
	}
	w := getWaiter()
	w.l, w.offset, w.done = l, offset, done
	l.ld.addWaiterHeld(w, h)
}

func beUint32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[3]) | uint32(b[2])<<8 | uint32(b[1])<<16 | uint32(b[0])<<24
}

func beUint64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[7]) | uint64(b[6])<<8 | uint64(b[5])<<16 | uint64(b[4])<<24 |
		uint64(b[3])<<32 | uint64(b[2])<<40 | uint64(b[1])<<48 | uint64(b[0])<<56
}

// undoWrite handles a failed append write at pos: the bytes that did reach
// the file are cut off again, so the log is as before and takes appends once
// the cause (a full disk, typically) is gone. When the cut fails too, the
// directory goes offline.
func (l *Log) undoWrite(seg *segment, pos int64, err error) error {
	l.m.reportIO(l.tp.String(), err, "op", "write", "segment", seg.base, "position", pos)
	if terr := seg.cutFile(pos); terr != nil {
		l.m.reportIO(l.tp.String(), terr, "op", "truncate")
		l.ld.setOffline(terr)
		return fmt.Errorf("append %s: %w (undoing it: %w)", l.tp, l.ld.offlineErr(), err)
	}
	l.dropPreallocLocked(seg) // the cut took any blocks allocated ahead
	return ioFailure(fmt.Sprintf("append %s", l.tp), err)
}

// checkLeaderMarker checks a control batch of a leader append (the
// coordinator's marker): a transactional batch of a producer holding one
// uncompressed marker record, from an epoch and a coordinator epoch the
// producer state accepts.
func (l *Log) checkLeaderMarker(h *BatchHeader, b []byte) error {
	if h.ProducerID < 0 || !h.Transactional() || h.NumRecords != 1 {
		return fmt.Errorf("%w: a control batch must be one transaction marker of a producer", ErrInvalidRecord)
	}
	ctl, err := decodeControl(h, b, nil)
	if err != nil {
		return err
	}
	if !ctl.valid {
		return fmt.Errorf("%w: control batch without a marker", ErrInvalidRecord)
	}
	return l.prod.checkMarker(h, ctl)
}

// applyProducers updates the producer state with the batches just written
// to seg (offsets assigned) and adds the index entries of the aborts among
// them. Called with appendMu held, before the batches are published.
func (l *Log) applyProducers(seg *segment, batches []byte) error {
	var aborted []AbortedTxn
	var cod *codecs
	defer func() {
		if cod != nil {
			cod.close()
		}
	}()
	for p := 0; p < len(batches); {
		h := parseHeaderUnchecked(batches[p:])
		size := int(h.Size())
		if h.ProducerID >= 0 {
			seg.noProducers = false
			var ctl controlInfo
			if h.Control() {
				var err error
				if h.Compression() != codecNone && cod == nil {
					cod = newCodecs(1 << 20)
				}
				if ctl, err = decodeControl(&h, batches[p:p+size], cod); err != nil {
					// A follower's copy of a marker it cannot read: it changes no
					// state (as an emptied one), and is reported.
					l.logger.Warn("unreadable transaction marker", "offset", h.BaseOffset, "err", err)
					ctl = controlInfo{}
				}
			}
			if ct, ok := l.prod.update(&h, ctl); ok {
				aborted = l.completeTxn(ct, aborted)
			}
		}
		p += size
	}
	if len(aborted) == 0 {
		return nil
	}
	created, err := seg.appendTxn(aborted)
	if created {
		l.dirDirty.Store(true)
	}
	return err
}

// completeTxn records the transaction ct a marker closed: an abort adds
// its index entry to entries (nil: not collected), with the last stable
// offset it leaves.
func (l *Log) completeTxn(ct completedTxn, entries []AbortedTxn) []AbortedTxn {
	if ct.abort {
		entries = append(entries, AbortedTxn{ProducerID: ct.pid, FirstOffset: ct.first, LastOffset: ct.last,
			LastStableOffset: l.txns.lsoAfter(ct.pid, ct.last)})
	}
	l.txns.complete(ct.pid, ct.first, ct.last)
	return entries
}

// undoTxnWrite undoes an append whose transaction index write failed after
// its batches were written (not yet published): the batches are cut off
// again, the new index entries dropped, and the producer state rebuilt
// from the log, so that the log is as it was. When the cut fails, the
// directory goes offline.
func (l *Log) undoTxnWrite(seg *segment, pos int64, err error) error {
	l.m.reportIO(l.tp.String(), err, "op", "write", "file", "txnindex", "segment", seg.base)
	n := 0
	for _, a := range seg.tix.all() {
		if a.LastOffset < l.leo.Load() {
			n++
		}
	}
	l.dropPreallocLocked(seg) // the cut takes any blocks allocated ahead
	terr := seg.cutFile(pos)
	if terr == nil {
		terr = seg.dropTxnFrom(n)
	}
	l.rebuildProducerState(l.leo.Load(), math.MaxInt64) // reads only: no error
	if terr != nil {
		l.m.reportIO(l.tp.String(), terr, "op", "truncate")
		l.ld.setOffline(terr)
		return fmt.Errorf("append %s: %w (undoing it: %w)", l.tp, l.ld.offlineErr(), err)
	}
	return ioFailure(fmt.Sprintf("append %s", l.tp), err)
}
