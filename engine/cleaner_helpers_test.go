package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
)

// kv is one record for keyedBatch: a nil value is a tombstone; noKey
// writes a null key.
type kv struct {
	key   string
	value []byte
	noKey bool
	ts    int64
}

// batchOpts are the batch-level fields of keyedBatch.
type batchOpts struct {
	codec         int
	baseTs        int64
	pid           int64 // 0: none
	epoch         int16
	seq           int32
	transactional bool
	control       bool
	baseOffset    int64 // for follower appends
	leaderEpoch   int32
}

var testCodecs = newCodecs(64 << 20)

// encodeRecord appends one record (offset delta i) to dst.
func encodeRecord(dst []byte, r kv, i int, baseTs int64, headers int) []byte {
	var body []byte
	body = append(body, 0)
	body = binary.AppendVarint(body, r.ts-baseTs)
	body = binary.AppendVarint(body, int64(i))
	if r.noKey {
		body = binary.AppendVarint(body, -1)
	} else {
		body = binary.AppendVarint(body, int64(len(r.key)))
		body = append(body, r.key...)
	}
	if r.value == nil {
		body = binary.AppendVarint(body, -1)
	} else {
		body = binary.AppendVarint(body, int64(len(r.value)))
		body = append(body, r.value...)
	}
	body = binary.AppendVarint(body, int64(headers))
	for h := 0; h < headers; h++ {
		body = binary.AppendVarint(body, 2)
		body = append(body, "hk"...)
		body = binary.AppendVarint(body, 1)
		body = append(body, 'v')
	}
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

// keyedBatch builds a v2 batch of recs (offset deltas 0..n-1), compressed
// with o.codec by the engine's own encoder.
func keyedBatch(t testing.TB, recs []kv, o batchOpts) []byte {
	t.Helper()
	var payload []byte
	maxTs := o.baseTs
	for i, r := range recs {
		if r.ts == 0 {
			recs[i].ts = o.baseTs + int64(i)
			r = recs[i]
		}
		maxTs = max(maxTs, r.ts)
		payload = encodeRecord(payload, r, i, o.baseTs, i%3)
	}
	if o.codec != codecNone {
		var err error
		if payload, err = testCodecs.compress(o.codec, payload, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	h := BatchHeader{BaseOffset: o.baseOffset, PartitionLeaderEpoch: o.leaderEpoch, LastOffsetDelta: int32(len(recs) - 1),
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if o.pid != 0 {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = o.pid, o.epoch, o.seq
	}
	attrs := int16(o.codec)
	if o.transactional {
		attrs |= attrTransactional
	}
	if o.control {
		attrs |= attrControl
		h.BaseSequence = -1
	}
	return appendBatch(nil, &h, attrs, o.baseTs, maxTs, int32(len(recs)), payload)
}

// markerBatch builds a transaction marker (control batch) for pid.
func markerBatch(t testing.TB, pid int64, epoch int16, commit bool, baseOffset, ts int64) []byte {
	t.Helper()
	var key [4]byte
	if commit {
		key[3] = controlCommit
	}
	val := []byte{0, 0, 0, 0, 0, 1} // version 0, coordinator epoch 1
	return keyedBatch(t, []kv{{key: string(key[:]), value: val, ts: ts}},
		batchOpts{pid: pid, epoch: epoch, transactional: true, control: true, baseOffset: baseOffset, baseTs: ts})
}

// logRecord is a record read back from a log.
type logRecord struct {
	offset int64
	key    string
	value  []byte
	tomb   bool
	noKey  bool
	ts     int64
	batch  BatchHeader
}

// readLog reads every batch from the log start to the log end and
// decodes its records, checking CRCs, that batches and records increase
// in offset, and that each record lies within its batch.
func readLog(t testing.TB, l *Log) (hs []BatchHeader, recs []logRecord) {
	t.Helper()
	off, leo := l.LogStartOffset(), l.LogEndOffset()
	var buf []byte
	c := newCodecs(64 << 20)
	defer c.close()
	prev := int64(-1)
	for off < leo {
		var err error
		buf, err = l.ReadCopy(off, 1<<20, leo, true, buf[:0])
		if err != nil {
			t.Fatalf("ReadCopy(%d): %v", off, err)
		}
		if len(buf) == 0 {
			t.Fatalf("ReadCopy(%d) returned nothing below the log end %d", off, leo)
		}
		for p := 0; p < len(buf); {
			h, err := validateStoredBatch(buf[p:])
			if err != nil {
				t.Fatalf("batch at read offset %d: %v", off, err)
			}
			if h.BaseOffset <= prev {
				t.Fatalf("batch %d..%d after offset %d", h.BaseOffset, h.LastOffset(), prev)
			}
			hs = append(hs, h)
			payload := buf[p+BatchHeaderSize : p+int(h.Size())]
			if h.Compression() != 0 {
				if payload, _, err = c.decompress(h.Compression(), payload, nil); err != nil {
					t.Fatalf("batch %d: %v", h.BaseOffset, err)
				}
			}
			err = forEachRecord(payload, h.NumRecords, h.LastOffsetDelta, func(r *record) error {
				lr := logRecord{offset: h.BaseOffset + r.offDelta, key: string(r.key), tomb: r.valueNull, noKey: r.keyNull,
					ts: h.BaseTimestamp + r.tsDelta, batch: h}
				if !r.valueNull {
					lr.value = append([]byte(nil), r.value...)
				}
				recs = append(recs, lr)
				return nil
			})
			if err != nil {
				t.Fatalf("records of batch %d: %v", h.BaseOffset, err)
			}
			prev = h.LastOffset()
			off = h.LastOffset() + 1
			p += int(h.Size())
		}
	}
	return hs, recs
}

// compactNow runs Manager.Compact and fails on an error.
func compactNow(t testing.TB, m *Manager) int {
	t.Helper()
	n, err := m.Compact(context.Background())
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	return n
}

// compactConfig is a compacted log with small segments.
func compactConfig() LogConfig {
	c := smallConfig()
	c.Compact, c.Delete = true, false
	c.MinCleanableDirtyRatio = 0
	c.RetentionMs, c.RetentionBytes = -1, -1
	return c
}

func codecName(c int) string { return [...]string{"none", "gzip", "snappy", "lz4", "zstd"}[c] }

func valueOf(key string, n int) []byte { return []byte(fmt.Sprintf("%s=v%d", key, n)) }
