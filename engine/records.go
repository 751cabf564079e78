package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Records inside a batch (v2), as the log cleaner reads them: the engine
// decodes records nowhere else (the append and read paths see headers
// only).
//
//	record:  length varint (of what follows), attributes int8,
//	         timestampDelta varlong, offsetDelta varint,
//	         keyLength varint (-1 = null), key,
//	         valueLength varint (-1 = null: a tombstone), value,
//	         headerCount varint, headers
//	header:  keyLength varint (>= 0), key, valueLength varint (-1 = null), value
//
// Varints are zig-zag encoded (encoding/binary's Varint). Timestamps and
// offsets are deltas from the batch's baseTimestamp and baseOffset.

// record is one decoded record; its slices point into the payload.
type record struct {
	raw       []byte // the whole record, its length prefix included
	tsAt      int    // position in raw of the timestamp delta
	tsLen     int    // its width
	tsDelta   int64
	offDelta  int64
	key       []byte
	keyNull   bool
	value     []byte
	valueNull bool
}

// minRecordSize is the smallest encoded record: a one-byte length and six
// one-byte fields (attributes, timestamp and offset deltas, key and value
// lengths, header count).
const minRecordSize = 7

// forEachRecord decodes the count records of payload (a batch's records,
// decompressed) and calls fn for each, stopping at its first error. It
// checks what Kafka checks reading a record (DefaultRecord.readFrom): each
// record's length covers its fields exactly; key, value and header lengths
// are not below -1 (0 for a header key) and fit; and also that the offset
// deltas increase strictly within [0, lastDelta] and that the payload
// holds exactly count records. It allocates nothing; the record passed to
// fn is overwritten by the next one, and its slices point into payload.
func forEachRecord(payload []byte, count, lastDelta int32, fn func(*record) error) error {
	var r record
	return forEachRecordInto(payload, count, lastDelta, &r, fn)
}

// forEachRecordInto is forEachRecord decoding into the caller's r, so
// that nothing is allocated.
func forEachRecordInto(payload []byte, count, lastDelta int32, rp *record, fn func(*record) error) error {
	if count < 0 || int64(count)*minRecordSize > int64(len(payload)) {
		return fmt.Errorf("%w: %d records in %d bytes", ErrInvalidRecord, count, len(payload))
	}
	r := rp
	prev := int64(-1)
	p := 0
	for i := int32(0); i < count; i++ {
		n, w := binary.Varint(payload[p:])
		if w <= 0 || n <= 0 || n > int64(len(payload)-p-w) {
			return fmt.Errorf("%w: record %d length", ErrInvalidRecord, i)
		}
		raw := payload[p : p+w+int(n)]
		if err := decodeRecord(raw, w, r); err != nil {
			return fmt.Errorf("%w: record %d: %w", ErrInvalidRecord, i, err)
		}
		if r.offDelta <= prev || r.offDelta > int64(lastDelta) {
			return fmt.Errorf("%w: record %d offset delta %d (previous %d, last %d)", ErrInvalidRecord, i, r.offDelta, prev, lastDelta)
		}
		prev = r.offDelta
		if err := fn(r); err != nil {
			return err
		}
		p += len(raw)
	}
	if p != len(payload) {
		return fmt.Errorf("%w: %d bytes after %d records", ErrInvalidRecord, len(payload)-p, count)
	}
	return nil
}

type recordError string

func (e recordError) Error() string { return string(e) }

// decodeRecord parses raw (one record, its length prefix of w bytes
// included) into r.
func decodeRecord(raw []byte, w int, r *record) error {
	*r = record{raw: raw}
	b := raw[w:]
	q := 1 // attributes
	if len(b) < 1 {
		return recordError("no attributes")
	}
	v, k := binary.Varint(b[q:])
	if k <= 0 {
		return recordError("timestamp delta")
	}
	r.tsAt, r.tsLen, r.tsDelta = w+q, k, v
	q += k
	if v, k = binary.Varint(b[q:]); k <= 0 || v < -1<<31 || v > 1<<31-1 {
		return recordError("offset delta")
	}
	r.offDelta = v
	q += k
	var err error
	if r.key, r.keyNull, q, err = lengthPrefixed(b, q, true); err != nil {
		return recordError("key: " + err.Error())
	}
	if r.value, r.valueNull, q, err = lengthPrefixed(b, q, true); err != nil {
		return recordError("value: " + err.Error())
	}
	nh, k := binary.Varint(b[q:])
	if k <= 0 || nh < 0 || nh > int64(len(b)-q) {
		return recordError("header count")
	}
	q += k
	for j := int64(0); j < nh; j++ {
		if _, _, q, err = lengthPrefixed(b, q, false); err != nil {
			return recordError("header key: " + err.Error())
		}
		if _, _, q, err = lengthPrefixed(b, q, true); err != nil {
			return recordError("header value: " + err.Error())
		}
	}
	if q != len(b) {
		return recordError(fmt.Sprintf("%d bytes left over", len(b)-q))
	}
	return nil
}

// lengthPrefixed reads a varint length and that many bytes at b[q:];
// -1 is null when nullable.
func lengthPrefixed(b []byte, q int, nullable bool) (field []byte, null bool, next int, err error) {
	if q > len(b) {
		return nil, false, q, recordError("cut short")
	}
	n, k := binary.Varint(b[q:])
	if k <= 0 {
		return nil, false, q, recordError("length")
	}
	q += k
	if n == -1 && nullable {
		return nil, true, q, nil
	}
	if n < 0 || n > int64(len(b)-q) {
		return nil, false, q, recordError(fmt.Sprintf("length %d", n))
	}
	return b[q : q+int(n)], false, q + int(n), nil
}

// appendRecordShifted appends r with its timestamp delta moved by shift
// (the batch's baseTimestamp changed by -shift), so that its absolute
// timestamp stays.
func appendRecordShifted(dst []byte, r *record, shift int64) []byte {
	if shift == 0 {
		return append(dst, r.raw...)
	}
	var tb [binary.MaxVarintLen64]byte
	tn := binary.PutVarint(tb[:], r.tsDelta+shift)
	_, w := binary.Varint(r.raw)
	body := len(r.raw) - w - r.tsLen + tn
	dst = binary.AppendVarint(dst, int64(body))
	dst = append(dst, r.raw[w:r.tsAt]...) // attributes
	dst = append(dst, tb[:tn]...)
	return append(dst, r.raw[r.tsAt+r.tsLen:]...)
}

// appendBatch appends a batch with h's base offset, last offset delta,
// leader epoch and producer fields, and the given attributes, timestamps,
// record count and records payload (already compressed), and computes its
// CRC.
func appendBatch(dst []byte, h *BatchHeader, attrs int16, baseTs, maxTs int64, count int32, payload []byte) []byte {
	start := len(dst)
	var hdr [BatchHeaderSize]byte
	dst = append(dst, hdr[:]...)
	b := dst[start:]
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[offLength:], uint32(BatchHeaderSize-logOverhead+len(payload)))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(baseTs))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[offNumRecords:], uint32(count))
	dst = append(dst, payload...)
	binary.BigEndian.PutUint32(dst[start+offCRC:], crc32.Checksum(dst[start+offAttributes:], castagnoli))
	return dst
}

// appendEmptyBatch appends h's header with no records: what Kafka writes
// (DefaultRecordBatch.writeEmptyHeader) for a batch whose records the
// cleaner removed but whose header it must keep. Both timestamps are the
// batch's max timestamp; the codec is none.
func appendEmptyBatch(dst []byte, h *BatchHeader) []byte {
	attrs := h.Attributes & (attrTimestampType | attrTransactional | attrControl)
	return appendBatch(dst, h, attrs, h.MaxTimestamp, h.MaxTimestamp, 0, nil)
}

// controlType is the type of a control record (a transaction marker): its
// key is version int16 (0), type int16.
const (
	controlAbort  = 0
	controlCommit = 1
)

// controlRecordType returns the type of a control batch's first record
// (-1 when it has none, as a marker the cleaner emptied).
func controlRecordType(r *record) int {
	if r.keyNull || len(r.key) < 4 {
		return -1
	}
	return int(int16(binary.BigEndian.Uint16(r.key[2:])))
}
