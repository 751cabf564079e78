package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Offsets of the fields of a record batch v2 header (see the package doc).
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// BatchHeaderSize is the size of a v2 batch header, records excluded.
	BatchHeaderSize = 61
	// logOverhead is the baseOffset and length fields, not counted by length.
	logOverhead = 12
)

// Attribute bits.
const (
	attrCompressionMask = 0x07
	attrTimestampType   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
	// attrDeleteHorizon (KIP-534) says that baseTimestamp holds the batch's
	// delete horizon: the time after which the cleaner may remove its
	// tombstones (or, for a control batch, the marker itself). The
	// records' timestamp deltas stay relative to baseTimestamp.
	attrDeleteHorizon = 0x40
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader is the header of a record batch v2.
type BatchHeader struct {
	BaseOffset           int64
	Length               int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the batch's total size in bytes.
func (h *BatchHeader) Size() int64 { return int64(h.Length) + logOverhead }

// LastOffset is the offset of the batch's last record.
func (h *BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Compression is the codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (h *BatchHeader) Compression() int { return int(h.Attributes & attrCompressionMask) }

// LogAppendTimeType reports whether the batch's timestamps are LogAppendTime.
func (h *BatchHeader) LogAppendTimeType() bool { return h.Attributes&attrTimestampType != 0 }

// Transactional reports the transactional attribute.
func (h *BatchHeader) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports the control-batch attribute.
func (h *BatchHeader) Control() bool { return h.Attributes&attrControl != 0 }

// Idempotent reports whether the batch carries a producer id.
func (h *BatchHeader) Idempotent() bool { return h.ProducerID >= 0 }

// DeleteHorizon returns the batch's delete horizon (KIP-534), set by the log
// cleaner the first time it keeps a tombstone or a transaction marker of the
// batch.
func (h *BatchHeader) DeleteHorizon() (ms int64, ok bool) {
	if h.Attributes&attrDeleteHorizon == 0 {
		return 0, false
	}
	return h.BaseTimestamp, true
}

// LastSequence is the sequence number of the batch's last offset, as Kafka
// computes it: baseSequence + lastOffsetDelta (with wrap-around), which
// stays right after compaction removed records of the batch.
func (h *BatchHeader) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return h.BaseSequence
	}
	s := int64(h.BaseSequence) + int64(h.LastOffsetDelta)
	if s > math.MaxInt32 {
		s -= math.MaxInt32 + 1
	}
	return int32(s)
}

// parseHeaderUnchecked decodes the fixed header fields of b (len(b) >= 61).
func parseHeaderUnchecked(b []byte) BatchHeader {
	return BatchHeader{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		Length:               int32(binary.BigEndian.Uint32(b[offLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:        int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(binary.BigEndian.Uint32(b[offNumRecords:])),
	}
}

// ParseBatchHeader decodes the header of the batch at the start of b and
// checks its framing: b holds at least the header, the length field covers at
// least a header, the magic byte is 2. It does not require the whole batch to
// be in b and does not check the CRC (ValidateBatch does).
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < logOverhead+5 {
		return BatchHeader{}, fmt.Errorf("%w: %d bytes, shorter than a batch header", ErrCorruptBatch, len(b))
	}
	length := int32(binary.BigEndian.Uint32(b[offLength:]))
	if b[offMagic] != 2 {
		return BatchHeader{}, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, int8(b[offMagic]))
	}
	if length < BatchHeaderSize-logOverhead {
		return BatchHeader{}, fmt.Errorf("%w: length %d shorter than a header", ErrCorruptBatch, length)
	}
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, fmt.Errorf("%w: %d bytes, shorter than a batch header", ErrCorruptBatch, len(b))
	}
	return parseHeaderUnchecked(b), nil
}

// ValidateBatch checks the batch at the start of b as the broker must before
// writing it: framing (ParseBatchHeader), that the whole batch is present, the
// CRC-32C, and record-level consistency that needs no decompression: a
// positive record count equal to lastOffsetDelta+1 and, for an uncompressed
// batch, record lengths that tile the payload exactly. It returns the header.
// It allocates nothing.
func ValidateBatch(b []byte) (BatchHeader, error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return h, err
	}
	size := h.Size()
	if int64(len(b)) < size {
		return h, fmt.Errorf("%w: batch of %d bytes truncated to %d", ErrCorruptBatch, size, len(b))
	}
	if got := crc32.Checksum(b[offAttributes:size], castagnoli); got != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptBatch, h.CRC, got)
	}
	if err := checkBatchContent(&h, b[BatchHeaderSize:size]); err != nil {
		return h, err
	}
	return h, nil
}

// validateStoredBatch is ValidateBatch for a batch that may have been
// compacted (a follower's append, a stored batch): the record count may
// be below lastOffsetDelta+1, down to zero (a batch emptied by the cleaner
// that keeps its header), and the records' offsets may have holes.
func validateStoredBatch(b []byte) (BatchHeader, error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return h, err
	}
	size := h.Size()
	if int64(len(b)) < size {
		return h, fmt.Errorf("%w: batch of %d bytes truncated to %d", ErrCorruptBatch, size, len(b))
	}
	if got := crc32.Checksum(b[offAttributes:size], castagnoli); got != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptBatch, h.CRC, got)
	}
	if err := checkStoredBatchContent(&h, b[BatchHeaderSize:size]); err != nil {
		return h, err
	}
	return h, nil
}

// checkBatchContent checks what can be checked without decoding records,
// for a batch as a producer sends it: every offset of the batch holds a
// record.
func checkBatchContent(h *BatchHeader, records []byte) error {
	if h.NumRecords <= 0 {
		return fmt.Errorf("%w: record count %d", ErrInvalidRecord, h.NumRecords)
	}
	if h.LastOffsetDelta < 0 || int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
		return fmt.Errorf("%w: record count %d with last offset delta %d", ErrInvalidRecord, h.NumRecords, h.LastOffsetDelta)
	}
	return checkRecordFraming(h, records)
}

// checkStoredBatchContent is checkBatchContent for a batch that compaction
// may have thinned: 0 <= count <= lastOffsetDelta+1.
func checkStoredBatchContent(h *BatchHeader, records []byte) error {
	if h.NumRecords < 0 || h.LastOffsetDelta < 0 || int64(h.NumRecords) > int64(h.LastOffsetDelta)+1 {
		return fmt.Errorf("%w: record count %d with last offset delta %d", ErrInvalidRecord, h.NumRecords, h.LastOffsetDelta)
	}
	if h.NumRecords == 0 && len(records) != 0 {
		return fmt.Errorf("%w: %d bytes of records in an empty batch", ErrInvalidRecord, len(records))
	}
	return checkRecordFraming(h, records)
}

// checkRecordFraming checks, for an uncompressed batch, that the record
// lengths tile the payload exactly; and the codec and producer fields.
func checkRecordFraming(h *BatchHeader, records []byte) error {
	if h.Compression() == 0 {
		// Each record starts with its length as a zig-zag varint: one byte
		// for a record under 64 bytes, two under 8 KiB, decoded inline here
		// (the walk runs once per record of every produced batch);
		// binary.Varint takes the longer ones and the malformed.
		p := 0
		for i := int32(0); i < h.NumRecords; i++ {
			var n int64
			var w int
			if p < len(records) && records[p] < 0x80 {
				n, w = int64(records[p]>>1)^-int64(records[p]&1), 1
			} else if p+1 < len(records) && records[p+1] < 0x80 {
				u := uint64(records[p]&0x7f) | uint64(records[p+1])<<7
				n, w = int64(u>>1)^-int64(u&1), 2
			} else {
				n, w = binary.Varint(records[p:])
			}
			if w <= 0 || n <= 0 || n > int64(len(records)-p-w) {
				return fmt.Errorf("%w: record %d of %d overruns the batch", ErrInvalidRecord, i, h.NumRecords)
			}
			p += w + int(n)
		}
		if p != len(records) {
			return fmt.Errorf("%w: %d trailing bytes after %d records", ErrInvalidRecord, len(records)-p, h.NumRecords)
		}
	} else if h.Compression() > 4 {
		return fmt.Errorf("%w: compression codec %d", ErrInvalidRecord, h.Compression())
	}
	// A transaction marker carries the producer id and epoch but no
	// sequence (Kafka writes -1); so does a coordinator's transactional
	// batch (the group coordinator's TxnOffsetCommit).
	if h.ProducerID >= 0 && (h.ProducerEpoch < 0 || h.BaseSequence < 0 && !h.Control() && !h.Transactional()) {
		return fmt.Errorf("%w: producer %d with epoch %d sequence %d", ErrInvalidRecord, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	return nil
}

// stampBatch writes the base offset and the partition leader epoch in place.
func stampBatch(b []byte, baseOffset int64, epoch int32) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(baseOffset))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}

// stampLogAppendTime sets the timestamp-type bit and maxTimestamp and
// recomputes the CRC over attrs..end (b holds exactly one batch).
func stampLogAppendTime(b []byte, now int64) {
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	binary.BigEndian.PutUint16(b[offAttributes:], attrs|attrTimestampType)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(now))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// lastSequence is base+count-1 with Kafka's wrap-around at MaxInt32.
func lastSequence(base, count int32) int32 {
	if count <= 0 {
		return base
	}
	if int64(base)+int64(count)-1 > math.MaxInt32 {
		return int32(int64(base) + int64(count) - 1 - math.MaxInt32 - 1)
	}
	return base + count - 1
}

// nextSequence is the sequence after seq, with wrap-around.
func nextSequence(seq int32) int32 {
	if seq == math.MaxInt32 {
		return 0
	}
	return seq + 1
}

// recordTimestamps calls fn with the offset and timestamp of each record of an
// uncompressed batch b (the whole batch), stopping when fn returns false. It
// returns ErrInvalidRecord for records it cannot decode.
func recordTimestamps(b []byte, fn func(offset, ts int64) bool) error {
	h := parseHeaderUnchecked(b)
	recs := b[BatchHeaderSize:]
	p := 0
	for i := int32(0); i < h.NumRecords && p < len(recs); i++ {
		n, w := binary.Varint(recs[p:])
		if w <= 0 || n <= 0 || n > int64(len(recs)-p-w) {
			return fmt.Errorf("%w: record %d", ErrInvalidRecord, i)
		}
		r := recs[p+w : p+w+int(n)]
		p += w + int(n)
		if len(r) < 1 {
			return fmt.Errorf("%w: record %d", ErrInvalidRecord, i)
		}
		tsDelta, w1 := binary.Varint(r[1:])
		if w1 <= 0 {
			return fmt.Errorf("%w: record %d timestamp", ErrInvalidRecord, i)
		}
		offDelta, w2 := binary.Varint(r[1+w1:])
		if w2 <= 0 {
			return fmt.Errorf("%w: record %d offset", ErrInvalidRecord, i)
		}
		ts := h.BaseTimestamp + tsDelta
		if h.LogAppendTimeType() {
			ts = h.MaxTimestamp
		}
		if !fn(h.BaseOffset+offDelta, ts) {
			return nil
		}
	}
	return nil
}

// BatchesEnd returns one past the last offset of the last whole batch at the start
// of b (a read's bytes: whole batches, then maybe a cut one), or -1 when b begins
// with none. It checks the framing only (lengths), not the batches.
func BatchesEnd(b []byte) int64 {
	end := int64(-1)
	for len(b) >= BatchHeaderSize {
		n := int64(int32(binary.BigEndian.Uint32(b[offLength:]))) + logOverhead
		if n < BatchHeaderSize || n > int64(len(b)) {
			break
		}
		end = int64(binary.BigEndian.Uint64(b[offBaseOffset:])) + int64(int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))) + 1
		b = b[n:]
	}
	return end
}
