package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// producerBatches is how many recent batches per producer are remembered for
// duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN).
const producerBatches = 5

// batchMeta is what is kept of one idempotent batch.
type batchMeta struct {
	firstSeq, lastSeq     int32
	firstOffset, lastOffs int64
	timestamp             int64
}

// producerEntry is the state of one producer id in one partition (Kafka's
// ProducerStateEntry).
//
// Invariants:
//  1. batches holds only batches of epoch (a new epoch, from a batch or a
//     marker, empties it).
//  2. txnFirst >= 0 exactly while the producer has a transaction open in
//     this partition: it wrote a transactional batch and no marker since.
//     Its span is then in the log's txnTracker.
type producerEntry struct {
	epoch      int16
	batches    [producerBatches]batchMeta // ring; the newest at (head+n-1)%5
	head, n    int
	coordEpoch int32 // coordinator epoch of the last marker; -1 before one
	txnFirst   int64 // first offset of the open transaction; -1 when none
	lastTs     int64 // timestamp of the last batch or marker (expiry)
}

func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{epoch: epoch, coordEpoch: -1, txnFirst: -1, lastTs: -1}
}

func (e *producerEntry) last() *batchMeta {
	if e.n == 0 {
		return nil
	}
	return &e.batches[(e.head+e.n-1)%producerBatches]
}

func (e *producerEntry) push(m batchMeta) {
	if e.n < producerBatches {
		e.batches[(e.head+e.n)%producerBatches] = m
		e.n++
		return
	}
	e.batches[e.head] = m
	e.head = (e.head + 1) % producerBatches
}

// prepend puts m before the oldest batch; the entry holds fewer than
// producerBatches.
func (e *producerEntry) prepend(m batchMeta) {
	e.head = (e.head + producerBatches - 1) % producerBatches
	e.batches[e.head] = m
	e.n++
}

// setEpoch moves the entry to epoch, forgetting the batches of the old one
// (Kafka's maybeUpdateProducerEpoch). An open transaction stays open.
func (e *producerEntry) setEpoch(epoch int16) {
	if epoch != e.epoch {
		e.epoch, e.head, e.n = epoch, 0, 0
	}
}

// verifyEntry is a transaction verification in progress for a producer
// that has no transaction open in the partition (KIP-890 part 1, Kafka's
// VerificationStateEntry): made by StartTxnVerification, marked verified
// by CompleteTxnVerification, removed by the producer's next
// transactional batch or marker.
type verifyEntry struct {
	guard     VerificationGuard
	verified  bool
	epoch     int16
	lowestSeq int32 // a higher sequence waits for this one (no reordering while verifying)
	created   int64 // unix ms, for expiry
}

// producerStates is the idempotence and transaction state of one
// partition. It is guarded by Log.appendMu; its txns tracker has its own
// lock for the readers of the last stable offset.
type producerStates struct {
	m     map[int64]*producerEntry
	verif map[int64]*verifyEntry
	txns  *txnTracker
}

// empty says whether the state holds no producer.
func (ps *producerStates) empty() bool { return len(ps.m) == 0 && len(ps.verif) == 0 }

func newProducerStates() producerStates {
	return producerStates{m: make(map[int64]*producerEntry), verif: map[int64]*verifyEntry{}, txns: &txnTracker{}}
}

// attach makes t the tracker of ps, filled with the transactions ps has
// open (a state loaded from a snapshot).
func (ps *producerStates) attach(t *txnTracker) {
	var spans []txnSpan
	for pid, e := range ps.m {
		if e.txnFirst >= 0 {
			spans = append(spans, txnSpan{pid: pid, first: e.txnFirst, last: -1})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].first < spans[j].first })
	t.reset(spans)
	ps.txns = t
}

// seqCheck is the running view of one producer inside a multi-batch append.
type seqCheck struct {
	pid     int64
	epoch   int16
	lastSeq int32
	inTxn   bool // a transaction is open after the previous batch
	valid   bool
}

// checkRules are the rules check applies beyond sequences and epochs.
type checkRules struct {
	// verify: a transactional batch that starts a transaction needs a
	// verified verifyEntry (transaction.partition.verification.enable).
	verify bool
}

// check validates the idempotent data batch h (a leader append) against the
// state (and prev, the previous batch of the same append). It returns the
// original batch when h is a retry of one of the last five.
//
//   - a lower epoch than known: ErrInvalidProducerEpoch;
//   - a higher epoch: the sequence must restart at 0;
//   - the same epoch: a batch equal to one of the last five is a duplicate,
//     otherwise the sequence must follow the last one (0 when the entry
//     has no batch of this epoch, as after a marker that bumped it);
//   - an unknown producer is accepted at any sequence (Kafka >= 2.5: its
//     state may have been removed with the segments that held it);
//   - transactions: a non-transactional batch while the producer has a
//     transaction open is ErrInvalidTxnState; a transactional batch that
//     would open one needs a verified verification (KIP-890), else
//     ErrInvalidTxnState; while a verification is pending, a sequence
//     above the lowest one it saw is ErrOutOfOrderSequence;
//   - a transactional batch without a sequence (-1: a coordinator's, the
//     group coordinator's TxnOffsetCommit) is held to the epoch and
//     transaction rules only.
func (ps *producerStates) check(h *BatchHeader, prev *seqCheck, rules checkRules) (*batchMeta, error) {
	last := h.LastSequence()
	if prev.valid && prev.pid == h.ProducerID {
		if h.ProducerEpoch < prev.epoch {
			return nil, fmt.Errorf("%w: producer %d epoch %d below %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, prev.epoch)
		}
		if h.ProducerEpoch > prev.epoch && h.BaseSequence != 0 || h.ProducerEpoch == prev.epoch && h.BaseSequence != nextSequence(prev.lastSeq) {
			return nil, fmt.Errorf("%w: producer %d sequence %d after %d", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, prev.lastSeq)
		}
		if prev.inTxn && !h.Transactional() {
			return nil, fmt.Errorf("%w: producer %d: a non-transactional batch inside its transaction", ErrInvalidTxnState, h.ProducerID)
		}
		prev.epoch, prev.lastSeq, prev.inTxn = h.ProducerEpoch, last, prev.inTxn || h.Transactional()
		return nil, nil
	}
	e := ps.m[h.ProducerID]
	inTxn := e != nil && e.txnFirst >= 0
	*prev = seqCheck{pid: h.ProducerID, epoch: h.ProducerEpoch, lastSeq: last, inTxn: inTxn || h.Transactional(), valid: true}
	if e != nil {
		if h.ProducerEpoch < e.epoch {
			return nil, fmt.Errorf("%w: producer %d epoch %d below %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
		}
		if h.ProducerEpoch == e.epoch && h.BaseSequence >= 0 {
			for i := 0; i < e.n; i++ {
				b := &e.batches[(e.head+i)%producerBatches]
				if b.firstSeq == h.BaseSequence && b.lastSeq == last {
					return b, nil
				}
			}
		}
	}
	if h.Transactional() && !inTxn && rules.verify {
		if v := ps.verif[h.ProducerID]; v == nil || !v.verified {
			return nil, fmt.Errorf("%w: producer %d: transactional batch in no transaction the coordinator verified", ErrInvalidTxnState, h.ProducerID)
		}
	}
	if inTxn && h.Transactional() && h.ProducerEpoch > e.epoch {
		// Transaction version 2 bumps the epoch at every EndTxn, and its
		// markers are written after EndTxn returns: a batch of the next
		// transaction may reach a partition before the marker of the one
		// open here. Taken, it would join that transaction and be committed
		// or aborted by its marker (Kafka's hasOngoingTransaction(pid, epoch)
		// sends such a batch to verification first, as net/kafka does; this
		// holds the line should a batch come past it).
		return nil, fmt.Errorf("%w: producer %d: a transactional batch at epoch %d while its transaction of epoch %d is open here (its marker not written yet)",
			ErrInvalidTxnState, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	if h.BaseSequence < 0 {
		// A coordinator's transactional batch (TxnOffsetCommit): no
		// sequence to check (Kafka's origin COORDINATOR).
		if inTxn && !h.Transactional() {
			return nil, fmt.Errorf("%w: producer %d: a non-transactional batch inside its transaction", ErrInvalidTxnState, h.ProducerID)
		}
		return nil, nil
	}
	if v := ps.verif[h.ProducerID]; v != nil && h.BaseSequence > v.lowestSeq {
		return nil, fmt.Errorf("%w: producer %d sequence %d above %d, which waits for verification", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, v.lowestSeq)
	}
	if e != nil {
		switch {
		case h.ProducerEpoch > e.epoch:
			if h.BaseSequence != 0 {
				return nil, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
			}
		case e.n == 0:
			if h.BaseSequence != 0 {
				return nil, fmt.Errorf("%w: producer %d epoch %d has no batch yet, sequence %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
			}
		default:
			if lb := e.last(); h.BaseSequence != nextSequence(lb.lastSeq) {
				return nil, fmt.Errorf("%w: producer %d sequence %d, expected %d", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, nextSequence(lb.lastSeq))
			}
		}
	}
	if inTxn && !h.Transactional() {
		return nil, fmt.Errorf("%w: producer %d: a non-transactional batch inside its transaction", ErrInvalidTxnState, h.ProducerID)
	}
	return nil, nil
}

// checkMarker validates a leader's transaction marker for h's producer
// (Kafka's appendEndTxnMarker checks): its epoch must not be below the
// producer's, nor its coordinator epoch below the last marker's.
func (ps *producerStates) checkMarker(h *BatchHeader, ctl controlInfo) error {
	e := ps.m[h.ProducerID]
	if e == nil {
		return nil
	}
	if h.ProducerEpoch < e.epoch {
		return fmt.Errorf("%w: marker of producer %d at epoch %d below %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	if ctl.coordEpoch < e.coordEpoch {
		return fmt.Errorf("%w: marker of producer %d from coordinator epoch %d, after %d", ErrTransactionCoordinatorFenced, h.ProducerID, ctl.coordEpoch, e.coordEpoch)
	}
	return nil
}

// producerExpirationMs is Kafka's producer.id.expiration.ms default: the
// state of a producer silent for this long is dropped.
const producerExpirationMs = 24 * 3600 * 1000

// expire drops producers whose newest batch or marker is older than
// now-producerExpirationMs, unless they have a transaction open, and
// verifications that old.
func (ps *producerStates) expire(now int64) (changed bool) {
	for pid, e := range ps.m {
		if e.txnFirst < 0 && now-e.lastTs >= producerExpirationMs {
			delete(ps.m, pid)
			changed = true
		}
	}
	for pid, v := range ps.verif {
		if now-v.created >= producerExpirationMs {
			delete(ps.verif, pid)
			changed = true
		}
	}
	return changed
}

// completedTxn is a transaction a marker ended.
type completedTxn struct {
	pid         int64
	first, last int64 // first offset of its data, offset of its marker
	abort       bool
}

// update records the written batch h (offsets assigned); ctl is its
// marker when h is a control batch. The sequence is taken from the last
// offset delta, so that a batch thinned or emptied by compaction gives the
// same state as the batch as written. It returns the transaction a marker
// completed (ok false for a marker of a producer with no data in the
// partition's transaction, which changes no offset's visibility).
func (ps *producerStates) update(h *BatchHeader, ctl controlInfo) (ct completedTxn, ok bool) {
	if h.ProducerID < 0 {
		return ct, false
	}
	if h.Control() && !ctl.valid {
		// An emptied marker: its transaction is gone from the log (Kafka:
		// no state change).
		return ct, false
	}
	e := ps.m[h.ProducerID]
	prevEpoch := int16(-1)
	if e == nil {
		e = newProducerEntry(h.ProducerEpoch)
		ps.m[h.ProducerID] = e
	} else {
		prevEpoch = e.epoch
	}
	e.setEpoch(h.ProducerEpoch)
	e.lastTs = h.MaxTimestamp
	if v := ps.verif[h.ProducerID]; v != nil && h.Transactional() {
		// A transactional batch starts the verified transaction: the verification is
		// used. A marker ends the transaction a pending verification was for, unless
		// that verification is the next transaction's: of the marker's epoch when the
		// marker bumped it (transaction version 2 writes its markers at the epoch
		// EndTxn bumped to, the one the producer's next transaction uses).
		next := h.Control() && v.epoch == h.ProducerEpoch && prevEpoch >= 0 && h.ProducerEpoch > prevEpoch
		if !next {
			delete(ps.verif, h.ProducerID)
		}
	}
	if h.Control() {
		// A marker carries the epoch but no sequence: the producer's
		// sequence goes on from its last data batch of the epoch.
		e.coordEpoch = ctl.coordEpoch
		if e.txnFirst >= 0 {
			ct, ok = completedTxn{pid: h.ProducerID, first: e.txnFirst, last: h.BaseOffset, abort: !ctl.commit}, true
			e.txnFirst = -1
		}
		return ct, ok
	}
	e.push(batchMeta{
		firstSeq: h.BaseSequence, lastSeq: h.LastSequence(),
		firstOffset: h.BaseOffset, lastOffs: h.LastOffset(), timestamp: h.MaxTimestamp,
	})
	if h.Transactional() && e.txnFirst < 0 {
		e.txnFirst = h.BaseOffset
		ps.txns.begin(h.ProducerID, h.BaseOffset)
	}
	return ct, false
}

// Snapshot file (<offset>.snapshot), Kafka's producer snapshot version 1:
//
//	+---------+--------+-----------+--------------------------------------+
//	| version | crc    | count     | entries (46 bytes each)              |
//	| int16=1 | uint32 | int32     |                                      |
//	+---------+--------+-----------+--------------------------------------+
//	entry: producer_id int64, epoch int16, last_sequence int32,
//	       last_offset int64, offset_delta int32, timestamp int64,
//	       coordinator_epoch int32, current_txn_first_offset int64
//
// The CRC-32C covers everything after the crc field. Only the newest batch
// of each producer is kept, as in Kafka. A producer known by markers alone
// has last_sequence and last_offset -1; current_txn_first_offset is the
// first offset of its open transaction, -1 when none, and coordinator_epoch
// that of its last marker (-1 before one).
const snapshotEntrySize = 46

func (ps *producerStates) encodeSnapshot() []byte {
	pids := make([]int64, 0, len(ps.m))
	for pid := range ps.m {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	b := make([]byte, 10+snapshotEntrySize*len(pids))
	binary.BigEndian.PutUint16(b[0:], 1)
	binary.BigEndian.PutUint32(b[6:], uint32(len(pids)))
	p := 10
	for _, pid := range pids {
		e := ps.m[pid]
		lastSeq, lastOff, delta := int32(-1), int64(-1), int32(0)
		if lb := e.last(); lb != nil {
			lastSeq, lastOff, delta = lb.lastSeq, lb.lastOffs, int32(lb.lastOffs-lb.firstOffset)
		}
		binary.BigEndian.PutUint64(b[p:], uint64(pid))
		binary.BigEndian.PutUint16(b[p+8:], uint16(e.epoch))
		binary.BigEndian.PutUint32(b[p+10:], uint32(lastSeq))
		binary.BigEndian.PutUint64(b[p+14:], uint64(lastOff))
		binary.BigEndian.PutUint32(b[p+22:], uint32(delta))
		binary.BigEndian.PutUint64(b[p+26:], uint64(e.lastTs))
		binary.BigEndian.PutUint32(b[p+34:], uint32(e.coordEpoch))
		binary.BigEndian.PutUint64(b[p+38:], uint64(e.txnFirst))
		p += snapshotEntrySize
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoli))
	return b
}

// decodeSnapshot parses a snapshot file. Anything that does not hold
// together (size, CRC, a negative offset delta, a transaction starting
// after the producer's last batch, a producer listed twice) wraps
// ErrCorrupt.
func decodeSnapshot(b []byte) (producerStates, error) {
	ps := newProducerStates()
	if len(b) < 10 || binary.BigEndian.Uint16(b) != 1 {
		return ps, fmt.Errorf("%w: producer snapshot header", ErrCorrupt)
	}
	if crc32.Checksum(b[6:], castagnoli) != binary.BigEndian.Uint32(b[2:]) {
		return ps, fmt.Errorf("%w: producer snapshot crc", ErrCorrupt)
	}
	n := int64(binary.BigEndian.Uint32(b[6:]))
	if int64(len(b)) != 10+n*snapshotEntrySize {
		return ps, fmt.Errorf("%w: producer snapshot size", ErrCorrupt)
	}
	for p := 10; p < len(b); p += snapshotEntrySize {
		pid := int64(binary.BigEndian.Uint64(b[p:]))
		lastSeq := int32(binary.BigEndian.Uint32(b[p+10:]))
		lastOff := int64(binary.BigEndian.Uint64(b[p+14:]))
		delta := int32(binary.BigEndian.Uint32(b[p+22:]))
		ts := int64(binary.BigEndian.Uint64(b[p+26:]))
		txnFirst := int64(binary.BigEndian.Uint64(b[p+38:]))
		if pid < 0 || ps.m[pid] != nil {
			return ps, fmt.Errorf("%w: producer snapshot: producer id %d", ErrCorrupt, pid)
		}
		if delta < 0 || lastOff >= 0 && int64(delta) > lastOff || txnFirst < -1 || txnFirst >= 0 && (lastOff < 0 || txnFirst > lastOff) {
			return ps, fmt.Errorf("%w: producer snapshot: producer %d last offset %d delta %d transaction at %d", ErrCorrupt, pid, lastOff, delta, txnFirst)
		}
		e := newProducerEntry(int16(binary.BigEndian.Uint16(b[p+8:])))
		e.coordEpoch = int32(binary.BigEndian.Uint32(b[p+34:]))
		e.txnFirst = txnFirst
		e.lastTs = ts
		if lastOff >= 0 {
			fs := int64(lastSeq) - int64(delta)
			if fs < 0 {
				fs += 1 << 31
			}
			e.push(batchMeta{firstSeq: int32(fs), lastSeq: lastSeq, firstOffset: lastOff - int64(delta), lastOffs: lastOff, timestamp: ts})
		}
		ps.m[pid] = e
	}
	return ps, nil
}

// listSnapshots returns the offsets of the <offset>.snapshot files in dir, sorted.
func listSnapshots(fsys vfs.FS, dir string) ([]int64, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var offs []int64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, snapshotSuffix) {
			continue
		}
		off, err := strconv.ParseInt(strings.TrimSuffix(name, snapshotSuffix), 10, 64)
		if err == nil && off >= 0 {
			offs = append(offs, off)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	return offs, nil
}

func snapshotPath(dir string, off int64) string {
	return filepath.Join(dir, segmentFileName(off, snapshotSuffix))
}

// writeSnapshot writes the state as of offset (everything below it applied).
func (ps *producerStates) writeSnapshot(fsys vfs.FS, dir string, off int64) error {
	return writeFileAtomic(fsys, snapshotPath(dir, off), ps.encodeSnapshot())
}

// loadLatestSnapshot loads the newest readable snapshot at or below maxOff.
// It returns the offset it applies at, or -1 with an empty state.
func loadLatestSnapshot(fsys vfs.FS, dir string, maxOff int64) (producerStates, int64) {
	offs, err := listSnapshots(fsys, dir)
	if err != nil {
		return newProducerStates(), -1
	}
	for i := len(offs) - 1; i >= 0; i-- {
		if offs[i] > maxOff {
			continue
		}
		b, err := vfs.ReadFile(fsys, snapshotPath(dir, offs[i]))
		if err != nil {
			continue
		}
		ps, err := decodeSnapshot(b)
		if err != nil {
			continue
		}
		return ps, offs[i]
	}
	return newProducerStates(), -1
}

// removeSnapshots deletes snapshots with offset < below or > above.
func removeSnapshots(fsys vfs.FS, dir string, below, above int64) {
	offs, _ := listSnapshots(fsys, dir)
	for _, off := range offs {
		if off < below || off > above {
			if err := fsys.Remove(snapshotPath(dir, off)); err != nil && !errors.Is(err, os.ErrNotExist) {
				continue
			}
		}
	}
}
