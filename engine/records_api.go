package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"slices"
)

// The record codec of the coordinators that keep their state in internal
// topics (__consumer_offsets, __transaction_state, __share_group_state):
// AppendRecords and AppendProducerRecords write one batch; ForEachRecord
// reads one stored batch, ForEachRecordInBatches every batch of a read of
// a log, and ForEachBatch walks such a read batch by batch. The data path
// (append, fetch) decodes no record; these run off it.

// maxRecordsDecompressed bounds what the records of one batch may
// decompress to in ForEachRecord and ForEachRecordInBatches.
const maxRecordsDecompressed = 64 << 20

// Record is one record of a batch, for the coordinators that keep their
// state in internal topics (ForEachRecord reads them, AppendRecords
// writes them). A nil Key or Value is null (a nil Value: a tombstone).
type Record struct {
	Offset    int64 // absolute (ForEachRecord); ignored by AppendRecords
	Timestamp int64 // unix ms
	Key       []byte
	Value     []byte
}

// ForEachRecord checks the whole batch b as a stored batch (framing, CRC,
// the record count, a batch compaction may have thinned) and calls fn
// with each of its records in order, decompressing them (to at most 64
// MiB) first. Control batches (transaction markers) are skipped. The
// record's slices point into b or a decompression buffer and are valid
// only during fn. Errors wrap ErrCorrupt or ErrInvalidRecord, or are fn's.
func ForEachRecord(b []byte, fn func(Record) error) error {
	d := recordDecoder{limit: maxRecordsDecompressed}
	defer d.close()
	return d.batch(b, fn)
}

// ForEachBatch calls fn with the header and the bytes of each whole batch
// at the start of buf, in order. buf is what a read of a log returns:
// whole batches, then maybe one cut short, where a read bounded in bytes
// ended. The walk ends without error at a last batch cut short (fewer
// bytes left than a header, or than its length field says). It stops with
// an error wrapping ErrCorruptBatch (so ErrCorrupt) at a length field
// shorter than a header, or at a magic byte other than 2 (the error wraps
// ErrUnsupportedMagic too); a length field is never trusted past len(buf).
// It checks framing only: the CRC and the records are ForEachRecord's.
//
// b is buf[i:j:j]: it aliases buf (the caller's, valid as long as buf is)
// and its capacity ends with the batch, so appending to it copies. fn's
// error stops the walk and is returned unchanged. It allocates nothing.
func ForEachBatch(buf []byte, fn func(h BatchHeader, b []byte) error) error {
	for pos := 0; len(buf)-pos >= BatchHeaderSize; {
		b := buf[pos:]
		length := int64(int32(binary.BigEndian.Uint32(b[offLength:])))
		if length < BatchHeaderSize-logOverhead {
			return fmt.Errorf("%w: batch at byte %d: length %d shorter than a header", ErrCorruptBatch, pos, length)
		}
		size := logOverhead + length
		if size > int64(len(b)) {
			return nil // the read ended inside this batch
		}
		if b[offMagic] != 2 {
			return fmt.Errorf("%w: batch at byte %d: %w: magic %d", ErrCorruptBatch, pos, ErrUnsupportedMagic, int8(b[offMagic]))
		}
		if err := fn(parseHeaderUnchecked(b), b[:size:size]); err != nil {
			return err
		}
		pos += int(size)
	}
	return nil
}

// ForEachRecordInBatches is ForEachRecord over every whole batch of buf,
// walked as ForEachBatch walks it (a last batch cut short ends the walk
// without error): fn gets the records of each data batch, batch after
// batch. Control batches are skipped; the records of a transactional
// batch come as any others, whatever its transaction's outcome (a reader
// that must hold them back until their marker walks with ForEachBatch and
// reads each batch with ForEachRecord). A batch's framing and CRC are
// checked before fn sees any of its records, each record as it is
// decoded; the records are decompressed to at most 64 MiB a batch, with
// one set of decoders and one decompression buffer for the whole walk.
//
// Errors: a batch that does not hold (framing, CRC, a record, the codec,
// records that decompress past the bound) wraps ErrCorrupt, and also
// ErrInvalidRecord or ErrUnsupportedMagic where those apply; fn has seen
// the records before it (of that batch too, when a record fails). fn's
// error stops the walk and is returned unchanged. The record's slices
// point into buf or the walk's decompression buffer, and are valid only
// during fn.
func ForEachRecordInBatches(buf []byte, fn func(Record) error) error {
	return forEachRecordInBatches(buf, maxRecordsDecompressed, fn)
}

// forEachRecordInBatches is ForEachRecordInBatches decompressing a batch's
// records to at most limit bytes.
func forEachRecordInBatches(buf []byte, limit int, fn func(Record) error) error {
	d := recordDecoder{limit: limit}
	defer d.close()
	var fnErr error
	call := func(r Record) error {
		fnErr = fn(r)
		return fnErr
	}
	return ForEachBatch(buf, func(h BatchHeader, b []byte) error {
		err := d.batch(b, call)
		switch {
		case err == nil:
			return nil
		case fnErr != nil:
			return fnErr
		case errors.Is(err, ErrCorrupt):
			return fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
		}
		return fmt.Errorf("%w: batch at offset %d: %w", ErrCorruptBatch, h.BaseOffset, err)
	})
}

// recordDecoder reads the records of stored batches, keeping its codecs
// (made on the first compressed batch) and its decompression buffer from
// one batch to the next. One goroutine uses it; close releases the codecs.
type recordDecoder struct {
	limit int // what one batch's records may decompress to
	cod   *codecs
	buf   []byte // the last batch's decompressed records
}

func (d *recordDecoder) close() {
	if d.cod != nil {
		d.cod.close()
	}
}

// batch is ForEachRecord with d's codecs and buffer.
func (d *recordDecoder) batch(b []byte, fn func(Record) error) error {
	h, err := validateStoredBatch(b)
	if err != nil {
		return err
	}
	if h.Control() {
		return nil
	}
	payload := b[BatchHeaderSize:h.Size()]
	if c := h.Compression(); c != codecNone {
		if d.cod == nil {
			d.cod = newCodecs(d.limit)
		}
		if payload, _, err = d.cod.decompress(c, payload, d.buf); err != nil {
			return err
		}
		d.buf = payload
	}
	return forEachRecord(payload, h.NumRecords, h.LastOffsetDelta, func(r *record) error {
		rec := Record{Offset: h.BaseOffset + r.offDelta, Timestamp: h.BaseTimestamp + r.tsDelta}
		if h.LogAppendTimeType() {
			rec.Timestamp = h.MaxTimestamp
		}
		if !r.keyNull {
			rec.Key = r.key
		}
		if !r.valueNull {
			rec.Value = r.value
		}
		return fn(rec)
	})
}

// AppendRecords appends to dst one uncompressed batch holding recs (at
// least one), base offset 0 and no producer, ready for Log.Append; the
// first record's timestamp is the batch's base. It grows dst once, to the
// batch's exact size, and allocates nothing when dst has room; the batch
// copies recs' keys and values, which the caller keeps.
func AppendRecords(dst []byte, recs []Record) ([]byte, error) {
	return AppendProducerRecords(dst, BatchProducer{ID: -1, Epoch: -1, BaseSequence: -1}, recs)
}

// BatchProducer is the producer fields of a batch AppendProducerRecords
// writes. A coordinator's transactional batch (the group coordinator's
// TxnOffsetCommit) has BaseSequence -1: it is checked for its epoch and
// transaction, not for sequences.
type BatchProducer struct {
	ID            int64
	Epoch         int16
	BaseSequence  int32
	Transactional bool
}

// AppendProducerRecords is AppendRecords with p's producer fields. Errors
// (dst returned unchanged): ErrInvalidRecord for no records,
// ErrBatchTooLarge for a batch past the int32 length field.
func AppendProducerRecords(dst []byte, p BatchProducer, recs []Record) ([]byte, error) {
	if len(recs) == 0 {
		return dst, fmt.Errorf("%w: a batch without records", ErrInvalidRecord)
	}
	base, maxTs := recs[0].Timestamp, recs[0].Timestamp
	size := int64(BatchHeaderSize)
	for i := range recs {
		r := &recs[i]
		maxTs = max(maxTs, r.Timestamp)
		n := recordBodySize(int64(i), r.Timestamp-base, r.Key, r.Value)
		size += int64(varintSize(int64(n)) + n)
	}
	if size-logOverhead > math.MaxInt32 {
		return dst, fmt.Errorf("%w: %d records take %d bytes", ErrBatchTooLarge, len(recs), size)
	}
	dst = slices.Grow(dst, int(size))
	start := len(dst)
	h := BatchHeader{PartitionLeaderEpoch: -1, LastOffsetDelta: int32(len(recs) - 1), ProducerID: p.ID, ProducerEpoch: p.Epoch, BaseSequence: p.BaseSequence}
	var attrs int16
	if p.Transactional {
		attrs = attrTransactional
	}
	// The header, then the records written in place behind it; the length
	// and the CRC appendBatch computed for the header alone are redone.
	dst = appendBatch(dst, &h, attrs, base, maxTs, int32(len(recs)), nil)
	for i := range recs {
		r := &recs[i]
		dst = appendRecord(dst, int64(i), r.Timestamp-base, r.Key, r.Value)
	}
	b := dst[start:]
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-logOverhead))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return dst, nil
}

// appendRecord appends one record without headers (key and value nil:
// null).
func appendRecord(dst []byte, offDelta, tsDelta int64, key, value []byte) []byte {
	dst = appendVarint(dst, int64(recordBodySize(offDelta, tsDelta, key, value)))
	dst = append(dst, 0) // attributes
	dst = appendVarint(dst, tsDelta)
	dst = appendVarint(dst, offDelta)
	dst = appendNullable(dst, key)
	dst = appendNullable(dst, value)
	return append(dst, 0) // no headers
}

// recordBodySize is the size of what appendRecord writes after the
// record's length.
func recordBodySize(offDelta, tsDelta int64, key, value []byte) int {
	return 1 + varintSize(tsDelta) + varintSize(offDelta) + nullableSize(key) + nullableSize(value) + 1
}

func nullableSize(b []byte) int {
	if b == nil {
		return varintSize(-1)
	}
	return varintSize(int64(len(b))) + len(b)
}

func appendNullable(dst, b []byte) []byte {
	if b == nil {
		return appendVarint(dst, -1)
	}
	dst = appendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

func appendVarint(dst []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// varintSize is the size of v as appendVarint writes it.
func varintSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	return (bits.Len64(u|1) + 6) / 7
}
