package engine

import "fmt"

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
	h, err := validateStoredBatch(b)
	if err != nil {
		return err
	}
	if h.Control() {
		return nil
	}
	payload := b[BatchHeaderSize:h.Size()]
	if c := h.Compression(); c != codecNone {
		cod := newCodecs(64 << 20)
		defer cod.close()
		if payload, _, err = cod.decompress(c, payload, nil); err != nil {
			return err
		}
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
// first record's timestamp is the batch's base.
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

// AppendProducerRecords is AppendRecords with p's producer fields.
func AppendProducerRecords(dst []byte, p BatchProducer, recs []Record) ([]byte, error) {
	if len(recs) == 0 {
		return dst, fmt.Errorf("%w: a batch without records", ErrInvalidRecord)
	}
	base, maxTs := recs[0].Timestamp, recs[0].Timestamp
	var payload []byte
	for i := range recs {
		r := &recs[i]
		maxTs = max(maxTs, r.Timestamp)
		payload = appendRecord(payload, int64(i), r.Timestamp-base, r.Key, r.Value)
	}
	h := BatchHeader{PartitionLeaderEpoch: -1, LastOffsetDelta: int32(len(recs) - 1), ProducerID: p.ID, ProducerEpoch: p.Epoch, BaseSequence: p.BaseSequence}
	var attrs int16
	if p.Transactional {
		attrs = attrTransactional
	}
	return appendBatch(dst, &h, attrs, base, maxTs, int32(len(recs)), payload), nil
}

// appendRecord appends one record without headers (key and value nil:
// null).
func appendRecord(dst []byte, offDelta, tsDelta int64, key, value []byte) []byte {
	body := make([]byte, 0, 16+len(key)+len(value))
	body = append(body, 0)
	body = appendVarint(body, tsDelta)
	body = appendVarint(body, offDelta)
	body = appendNullable(body, key)
	body = appendNullable(body, value)
	body = appendVarint(body, 0)
	dst = appendVarint(dst, int64(len(body)))
	return append(dst, body...)
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
