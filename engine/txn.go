package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
)

// Transactions in a partition log (KIP-98, with KIP-890's defences), as
// Kafka's UnifiedLog and ProducerStateManager keep them:
//
//   - A producer's first transactional batch opens its transaction in the
//     partition at that batch's base offset; a marker (a control batch,
//     COMMIT or ABORT, written by the coordinator through WriteTxnMarkers)
//     closes it. The producer state keeps, per producer, the first offset
//     of its open transaction and the coordinator epoch of its last marker.
//   - The last stable offset (LSO) is the least of the high watermark and
//     the first offset of every transaction either open or closed by a
//     marker not yet below the high watermark (Kafka's first unstable
//     offset); never below the log start. read_committed fetches stop
//     there.
//   - Each ABORT marker of a transaction with data in the partition adds
//     an entry to the .txnindex of the segment the marker lands in (see
//     txnindex.go): Fetch's AbortedTransactions comes from there.
//
// Leader appends (AppendOptions.Follower false) are checked:
//
//   - a data batch of a lower producer epoch than known:
//     ErrInvalidProducerEpoch; a non-transactional batch from a producer
//     with a transaction open: ErrInvalidTxnState; a transactional batch
//     that would open a transaction: ErrInvalidTxnState unless a
//     verification was completed for it (KIP-890 part 1: the produce
//     handler asks the coordinator whether the partition is in the
//     transaction — StartTxnVerification, AddPartitionsToTxn verify-only,
//     CompleteTxnVerification — and the next marker or transactional batch
//     of the producer removes the verification, so a stale answer cannot
//     open a transaction the coordinator does not know);
//   - a marker: a single uncompressed control record with a known type,
//     from the producer's epoch or a later one (KIP-890 part 2 writes
//     markers with the bumped epoch) else ErrInvalidProducerEpoch, and a
//     coordinator epoch not below the last marker's, else
//     ErrTransactionCoordinatorFenced.
//
// Followers' appends and recovery apply batches and markers unchecked, as
// in Kafka. Clients must not write control batches: the produce handler
// refuses them (Kafka's INVALID_RECORD); the engine cannot tell a client's
// leader append from the coordinator's.

// Marker is a transaction marker: the control record a coordinator writes
// to each partition of a transaction once its outcome is decided.
//
//	control batch: attributes transactional|control, producer id and epoch,
//	               base sequence -1, one record:
//	  key   (4 bytes): version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
//	  value (6 bytes): version int16 (0) | coordinator epoch int32
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	Timestamp        int64 // unix ms; the record's and the batch's timestamp
}

// AppendMarkerBatch appends to dst the control batch of m, base offset 0,
// ready for Log.Append (or replication's leader append, which stamps the
// offset and leader epoch).
func AppendMarkerBatch(dst []byte, m Marker) []byte {
	var key [4]byte
	if m.Commit {
		binary.BigEndian.PutUint16(key[2:], controlCommit)
	}
	var val [6]byte
	binary.BigEndian.PutUint32(val[2:], uint32(m.CoordinatorEpoch))
	var rec []byte
	rec = append(rec, 0)              // attributes
	rec = binary.AppendVarint(rec, 0) // timestamp delta
	rec = binary.AppendVarint(rec, 0) // offset delta
	rec = binary.AppendVarint(rec, 4) // key length
	rec = append(rec, key[:]...)      //
	rec = binary.AppendVarint(rec, 6) // value length
	rec = append(rec, val[:]...)      //
	rec = binary.AppendVarint(rec, 0) // headers
	payload := binary.AppendVarint(make([]byte, 0, len(rec)+2), int64(len(rec)))
	payload = append(payload, rec...)
	h := BatchHeader{PartitionLeaderEpoch: -1, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, BaseSequence: -1}
	return appendBatch(dst, &h, attrTransactional|attrControl, m.Timestamp, m.Timestamp, 1, payload)
}

// DecodeMarker reads the marker of a control batch b (a whole batch, as
// stored or sent). ok is false for a control batch the cleaner emptied;
// an error (wrapping ErrInvalidRecord or ErrCorrupt) for anything that is
// not a readable marker.
func DecodeMarker(b []byte) (m Marker, ok bool, err error) {
	h, err := validateStoredBatch(b)
	if err != nil {
		return m, false, err
	}
	if !h.Control() {
		return m, false, fmt.Errorf("%w: not a control batch", ErrInvalidRecord)
	}
	ctl, err := decodeControl(&h, b[:h.Size()], nil)
	if err != nil || !ctl.valid {
		return m, false, err
	}
	return Marker{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, CoordinatorEpoch: ctl.coordEpoch,
		Commit: ctl.commit, Timestamp: h.MaxTimestamp}, true, nil
}

// controlInfo is a decoded marker; valid is false for an emptied control
// batch.
type controlInfo struct {
	valid      bool
	commit     bool
	coordEpoch int32
}

// decodeControl reads the first record of the control batch b (the whole
// batch). codecs decompresses a compressed one (nil: none allowed, as for
// a leader's append).
func decodeControl(h *BatchHeader, b []byte, c *codecs) (controlInfo, error) {
	if h.NumRecords == 0 {
		return controlInfo{}, nil
	}
	payload := b[BatchHeaderSize:]
	if codec := h.Compression(); codec != codecNone {
		if c == nil {
			return controlInfo{}, fmt.Errorf("%w: compressed control batch", ErrInvalidRecord)
		}
		var err error
		if payload, _, err = c.decompress(codec, payload, nil); err != nil {
			return controlInfo{}, err
		}
	}
	var ci controlInfo
	first := true
	err := forEachRecord(payload, h.NumRecords, h.LastOffsetDelta, func(r *record) error {
		if !first {
			return nil
		}
		first = false
		if r.keyNull || len(r.key) < 4 || binary.BigEndian.Uint16(r.key) != 0 {
			return fmt.Errorf("%w: control record key", ErrInvalidRecord)
		}
		switch binary.BigEndian.Uint16(r.key[2:]) {
		case controlAbort:
		case controlCommit:
			ci.commit = true
		default:
			return fmt.Errorf("%w: control record type %d", ErrInvalidRecord, binary.BigEndian.Uint16(r.key[2:]))
		}
		// EndTransactionMarker: version int16, coordinator epoch int32
		// (later versions append fields).
		if r.valueNull || len(r.value) < 6 {
			return fmt.Errorf("%w: transaction marker value", ErrInvalidRecord)
		}
		ci.coordEpoch = int32(binary.BigEndian.Uint32(r.value[2:]))
		ci.valid = true
		return nil
	})
	return ci, err
}

// AbortedTxn is an aborted transaction of the partition, as the .txnindex
// stores it and Fetch's AbortedTransactions reports it (with FirstOffset).
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64 // first offset of its data
	LastOffset  int64 // offset of its abort marker
	// LastStableOffset is the LSO the abort left: the first offset of the
	// earliest transaction of another producer still open then, else
	// LastOffset+1. A search for the aborted transactions of a range
	// stops at the first entry whose LastStableOffset reaches its end.
	LastStableOffset int64
}

// txnSpan is a transaction in the tracker: last is -1 while it is open,
// the offset of its marker once closed.
type txnSpan struct {
	pid, first, last int64
}

// txnTracker holds the transactions that bound the last stable offset:
// those open and those whose marker is not yet below the high watermark
// (Kafka's ongoingTxns and unreplicatedTxns), by first offset. Writers
// hold Log.appendMu; readers (LastStableOffset) only mu.
type txnTracker struct {
	mu    sync.Mutex
	spans []txnSpan    // sorted by first offset
	n     atomic.Int32 // len(spans), for the reader's lock-free fast path
}

func (t *txnTracker) reset(spans []txnSpan) {
	t.mu.Lock()
	t.spans = spans
	t.n.Store(int32(len(spans)))
	t.mu.Unlock()
}

// begin adds pid's transaction opened at first (the log end: above every
// span's first).
func (t *txnTracker) begin(pid, first int64) {
	t.mu.Lock()
	t.spans = append(t.spans, txnSpan{pid: pid, first: first, last: -1})
	if n := len(t.spans); n > 1 && t.spans[n-2].first > first {
		sort.Slice(t.spans, func(i, j int) bool { return t.spans[i].first < t.spans[j].first })
	}
	t.n.Store(int32(len(t.spans)))
	t.mu.Unlock()
}

// lsoAfter is the last stable offset an abort of pid's transaction with
// marker at last leaves (Kafka's lastStableOffset(completedTxn)).
func (t *txnTracker) lsoAfter(pid, last int64) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.spans {
		if s.last < 0 && s.pid != pid {
			return s.first
		}
	}
	return last + 1
}

// complete records that pid's transaction opened at first was closed by a
// marker at last.
func (t *txnTracker) complete(pid, first, last int64) {
	t.mu.Lock()
	for i := range t.spans {
		if t.spans[i].pid == pid && t.spans[i].first == first && t.spans[i].last < 0 {
			t.spans[i].last = last
			break
		}
	}
	t.mu.Unlock()
}

// firstUnstable drops the spans closed below hw and returns the first
// offset of the earliest remaining one (MaxInt64 if none).
func (t *txnTracker) firstUnstable(hw int64) int64 {
	if t.n.Load() == 0 {
		return math.MaxInt64
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	kept := t.spans[:0]
	for _, s := range t.spans {
		if s.last < 0 || s.last >= hw {
			kept = append(kept, s)
		}
	}
	clear(t.spans[len(kept):])
	t.spans = kept
	t.n.Store(int32(len(kept)))
	if len(kept) == 0 {
		return math.MaxInt64
	}
	return kept[0].first
}

// firstOpen is the first offset of the earliest transaction still open
// (MaxInt64 if none), whatever the high watermark.
func (t *txnTracker) firstOpen() int64 {
	if t.n.Load() == 0 {
		return math.MaxInt64
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.spans {
		if s.last < 0 {
			return s.first
		}
	}
	return math.MaxInt64
}

// LastStableOffset is the offset below which every transaction is decided
// and its marker below the high watermark: the end of what read_committed
// consumers may read. It lies in [log start, high watermark].
func (l *Log) LastStableOffset() int64 {
	hw := l.hw.Load()
	lso := min(hw, l.txns.firstUnstable(hw))
	return max(lso, l.logStart.Load())
}

// AbortedTransactions appends to dst the aborted transactions that overlap
// the offsets [from, upTo): those whose data starts below upTo and whose
// abort marker is at or after from (what a read_committed Fetch from
// offset `from` returns as AbortedTransactions, with upTo the end of the
// data it sends, or its last stable offset). They come in the order of
// their markers.
func (l *Log) AbortedTransactions(from, upTo int64, dst []AbortedTxn) []AbortedTxn {
	if from >= upTo {
		return dst
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return dst
	}
	for i := l.segmentForLocked(from); i < len(l.segs); i++ {
		var done bool
		dst, done = l.segs[i].tix.collect(from, upTo, dst)
		if done {
			break
		}
	}
	return dst
}

// ProducerInfo is one producer the log knows (DescribeProducers).
type ProducerInfo struct {
	ProducerID       int64
	ProducerEpoch    int16
	LastSequence     int32 // -1 when it has no batch in this epoch
	LastTimestamp    int64 // of its last batch or marker
	CoordinatorEpoch int32 // of its last marker, -1 before one
	TxnStartOffset   int64 // first offset of its open transaction, -1 when none
}

// Producers returns the producers the log knows, by producer id.
func (l *Log) Producers() []ProducerInfo {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	out := make([]ProducerInfo, 0, len(l.prod.m))
	for pid, e := range l.prod.m {
		seq := int32(-1)
		if lb := e.last(); lb != nil {
			seq = lb.lastSeq
		}
		out = append(out, ProducerInfo{ProducerID: pid, ProducerEpoch: e.epoch, LastSequence: seq, LastTimestamp: e.lastTs,
			CoordinatorEpoch: e.coordEpoch, TxnStartOffset: e.txnFirst})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// OpenTransaction reports the first offset of pid's open transaction in
// the partition.
func (l *Log) OpenTransaction(pid int64) (first int64, ok bool) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if e := l.prod.m[pid]; e != nil && e.txnFirst >= 0 {
		return e.txnFirst, true
	}
	return -1, false
}

// VerificationGuard identifies one transaction verification of a producer
// in a partition (Kafka's VerificationGuard). Zero is no guard.
type VerificationGuard uint64

var guardSeq atomic.Uint64

// StartTxnVerification begins, for a transactional batch of pid at epoch
// and base sequence seq, the check that the partition is part of the
// producer's transaction (KIP-890 part 1). needed is false when no check
// is needed: the producer already has a transaction open here at epoch
// (Kafka's hasOngoingTransaction(pid, epoch)), or verification is
// disabled. A batch of a higher epoch than the open transaction's is the
// next transaction's (transaction version 2 bumps the epoch at every
// EndTxn and writes the markers after answering it): it is verified, so
// that the coordinator holds it until the open one's marker is written
// here, rather than refused at the append. Otherwise the caller asks the transaction
// coordinator (AddPartitionsToTxn with VerifyOnly) and, if the partition
// is in the transaction, calls CompleteTxnVerification with the guard
// before appending. A verification already pending for pid is reused (its
// guard returned), its lowest sequence lowered to seq (or reset with a
// higher epoch): while it is pending, batches with a higher sequence are
// refused (ErrOutOfOrderSequence), so retries cannot reorder.
func (l *Log) StartTxnVerification(pid int64, epoch int16, seq int32) (g VerificationGuard, needed bool) {
	if l.m.noVerify.Load() {
		return 0, false
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if e := l.prod.m[pid]; e != nil && e.txnFirst >= 0 && epoch <= e.epoch {
		return 0, false
	}
	v := l.prod.verif[pid]
	if v == nil {
		v = &verifyEntry{guard: VerificationGuard(guardSeq.Add(1)), epoch: epoch, lowestSeq: seq, created: l.m.nowMs()}
		l.prod.verif[pid] = v
	} else {
		if epoch == v.epoch && seq < v.lowestSeq {
			v.lowestSeq = seq
		}
		if epoch > v.epoch {
			v.epoch, v.lowestSeq = epoch, seq
		}
	}
	return v.guard, true
}

// CompleteTxnVerification records that the coordinator confirmed the
// verification g of pid. It reports false when g is no longer the
// producer's pending verification (a marker or a transactional batch
// ended it meanwhile): the append that follows is then refused with
// ErrInvalidTxnState unless a transaction is open by then.
func (l *Log) CompleteTxnVerification(pid int64, g VerificationGuard) bool {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	v := l.prod.verif[pid]
	if v == nil || v.guard != g || g == 0 {
		return false
	}
	v.verified = true
	return true
}

// AppendMarker writes m as a leader (Kafka's appendAsLeader with origin
// coordinator): the control batch is checked against the producer state
// and completes the producer's transaction. o.Follower must be false.
// Replicated partitions append the batch of AppendMarkerBatch through
// replication instead (acks=all), which calls Append.
func (l *Log) AppendMarker(m Marker, o AppendOptions) (AppendResult, error) {
	if o.Follower {
		return AppendResult{}, fmt.Errorf("%w: a marker appended as a follower", ErrInvalidConfig)
	}
	return l.Append(AppendMarkerBatch(nil, m), o)
}

// SetTxnVerification turns KIP-890's verification of a transaction's first
// batch in a partition on or off at run time
// (transaction.partition.verification.enable; Options.DisableTxnVerification at
// Open).
func (m *Manager) SetTxnVerification(enable bool) { m.noVerify.Store(!enable) }
