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

// producerEntry is the state of one producer id in one partition.
type producerEntry struct {
	epoch   int16
	batches [producerBatches]batchMeta // ring; the newest at (head+n-1)%5
	head, n int
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

// producerStates is the idempotence state of one partition. It is guarded by
// Log.appendMu.
type producerStates struct {
	m map[int64]*producerEntry
}

func newProducerStates() producerStates { return producerStates{m: make(map[int64]*producerEntry)} }

// seqCheck is the running view of one producer inside a multi-batch append.
type seqCheck struct {
	pid     int64
	epoch   int16
	lastSeq int32
	valid   bool
}

// check validates the idempotent batch h against the state (and prev, the
// previous batch of the same append). It returns the original batch when h is
// a retry of one of the last five.
//
//   - a lower epoch than known: ErrInvalidProducerEpoch;
//   - a higher epoch: the sequence must restart at 0;
//   - the same epoch: a batch equal to one of the last five is a duplicate,
//     otherwise the sequence must follow the last one;
//   - an unknown producer is accepted at any sequence (Kafka >= 2.5: its
//     state may have been removed with the segments that held it).
func (ps *producerStates) check(h *BatchHeader, prev *seqCheck) (*batchMeta, error) {
	last := h.LastSequence()
	if prev.valid && prev.pid == h.ProducerID {
		if h.ProducerEpoch < prev.epoch {
			return nil, fmt.Errorf("%w: producer %d epoch %d below %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, prev.epoch)
		}
		if h.ProducerEpoch > prev.epoch && h.BaseSequence != 0 || h.ProducerEpoch == prev.epoch && h.BaseSequence != nextSequence(prev.lastSeq) {
			return nil, fmt.Errorf("%w: producer %d sequence %d after %d", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, prev.lastSeq)
		}
		*prev = seqCheck{h.ProducerID, h.ProducerEpoch, last, true}
		return nil, nil
	}
	*prev = seqCheck{h.ProducerID, h.ProducerEpoch, last, true}
	e := ps.m[h.ProducerID]
	if e == nil {
		return nil, nil
	}
	switch {
	case h.ProducerEpoch < e.epoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d below %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	case h.ProducerEpoch > e.epoch:
		if h.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return nil, nil
	}
	for i := 0; i < e.n; i++ {
		b := &e.batches[(e.head+i)%producerBatches]
		if b.firstSeq == h.BaseSequence && b.lastSeq == last {
			return b, nil
		}
	}
	if lb := e.last(); lb != nil && h.BaseSequence != nextSequence(lb.lastSeq) {
		return nil, fmt.Errorf("%w: producer %d sequence %d, expected %d", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, nextSequence(lb.lastSeq))
	}
	return nil, nil
}

// producerExpirationMs is Kafka's producer.id.expiration.ms default: the
// state of a producer silent for this long is dropped.
const producerExpirationMs = 24 * 3600 * 1000

// expire drops producers whose newest batch is older than now-producerExpirationMs.
func (ps *producerStates) expire(now int64) {
	for pid, e := range ps.m {
		if lb := e.last(); lb == nil || now-lb.timestamp >= producerExpirationMs {
			delete(ps.m, pid)
		}
	}
}

// update records the written batch h (offsets assigned). The sequence is
// taken from the last offset delta, so that a batch thinned or emptied by
// compaction gives the same state as the batch as written.
func (ps *producerStates) update(h *BatchHeader) {
	if h.ProducerID < 0 {
		return
	}
	e := ps.m[h.ProducerID]
	if e == nil {
		e = &producerEntry{epoch: h.ProducerEpoch}
		ps.m[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		*e = producerEntry{epoch: h.ProducerEpoch}
	}
	if h.Control() {
		// A transaction marker carries the epoch but no sequence: the
		// producer's sequence goes on from its last data batch (Kafka's
		// appendEndTxnMarker).
		return
	}
	e.push(batchMeta{
		firstSeq: h.BaseSequence, lastSeq: h.LastSequence(),
		firstOffset: h.BaseOffset, lastOffs: h.LastOffset(), timestamp: h.MaxTimestamp,
	})
}

// Snapshot file (<offset>.snapshot), Kafka's producer snapshot version 1:
//
//	+---------+--------+-----------+--------------------------------------+
//	| version | crc    | count     | entries (46 bytes each)              |
//	| int16=1 | uint32 | int32     |                                      |
//	+---------+--------+-----------+--------------------------------------+
//	entry: producer_id int64, epoch int16, last_sequence int32,
//	       last_offset int64, offset_delta int32, timestamp int64,
//	       coordinator_epoch int32, current_txn_first_offset int64 (-1)
//
// The CRC-32C covers everything after the crc field. Only the newest batch of
// each producer is kept, as in Kafka.
const snapshotEntrySize = 46

func (ps *producerStates) encodeSnapshot() []byte {
	pids := make([]int64, 0, len(ps.m))
	for pid, e := range ps.m {
		if e.n > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	b := make([]byte, 10+snapshotEntrySize*len(pids))
	binary.BigEndian.PutUint16(b[0:], 1)
	binary.BigEndian.PutUint32(b[6:], uint32(len(pids)))
	p := 10
	for _, pid := range pids {
		e := ps.m[pid]
		lb := e.last()
		binary.BigEndian.PutUint64(b[p:], uint64(pid))
		binary.BigEndian.PutUint16(b[p+8:], uint16(e.epoch))
		binary.BigEndian.PutUint32(b[p+10:], uint32(lb.lastSeq))
		binary.BigEndian.PutUint64(b[p+14:], uint64(lb.lastOffs))
		binary.BigEndian.PutUint32(b[p+22:], uint32(lb.lastOffs-lb.firstOffset))
		binary.BigEndian.PutUint64(b[p+26:], uint64(lb.timestamp))
		binary.BigEndian.PutUint32(b[p+34:], 0xFFFFFFFF)
		binary.BigEndian.PutUint64(b[p+38:], 0xFFFFFFFFFFFFFFFF)
		p += snapshotEntrySize
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoli))
	return b
}

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
		fs := int64(lastSeq) - int64(delta)
		if fs < 0 {
			fs += 1 << 31
		}
		firstSeq := int32(fs)
		e := &producerEntry{epoch: int16(binary.BigEndian.Uint16(b[p+8:]))}
		e.push(batchMeta{firstSeq: firstSeq, lastSeq: lastSeq, firstOffset: lastOff - int64(delta), lastOffs: lastOff,
			timestamp: int64(binary.BigEndian.Uint64(b[p+26:]))})
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
