package group

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

func sampleRecords() []Record {
	return []Record{
		{Timestamp: 1000, Key: AppendOffsetKey(nil, "g", "t", 0), Value: AppendOffsetValue(nil, OffsetValue{Version: 3, Offset: 5, LeaderEpoch: 1, CommitTimestamp: 1000})},
		{Timestamp: 1003, Key: AppendGroupKey(nil, "g"), Value: nil},
		{Timestamp: 999, Key: []byte("k"), Value: []byte{}},
	}
}

func decodeAll(t *testing.T, buf []byte) []Record {
	t.Helper()
	var out []Record
	err := DecodeBatches(buf, func(r Record) error {
		r.Key = append([]byte(nil), r.Key...)
		if r.Value != nil {
			r.Value = append([]byte{}, r.Value...)
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func checkSame(t *testing.T, got, want []Record, firstOffset int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Offset != firstOffset+int64(i) || g.Timestamp != w.Timestamp || !bytes.Equal(g.Key, w.Key) ||
			(g.Value == nil) != (w.Value == nil) || !bytes.Equal(g.Value, w.Value) {
			t.Errorf("record %d: got %+v want %+v", i, g, w)
		}
	}
}

func TestBatchRoundTrip(t *testing.T) {
	recs := sampleRecords()
	buf := AppendBatch(nil, recs)
	buf = AppendBatch(buf, recs[:1])
	got := decodeAll(t, buf)
	checkSame(t, got[:3], recs, 0)
	checkSame(t, got[3:], recs[:1], 0)
	// a truncated tail ends the walk quietly
	if got := decodeAll(t, buf[:len(buf)-3]); len(got) != 3 {
		t.Fatalf("truncated: %d records", len(got))
	}
	// a flipped byte fails the CRC
	bad := append([]byte(nil), buf...)
	bad[70] ^= 1
	if err := DecodeBatches(bad, func(Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt batch: %v", err)
	}
}

// recompress rewrites an uncompressed batch with its records compressed by codec.
func recompress(t *testing.T, batch []byte, codec uint16, compress func([]byte) []byte) []byte {
	t.Helper()
	body := compress(batch[batchHeaderLen:])
	out := append([]byte(nil), batch[:batchHeaderLen]...)
	out = append(out, body...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint16(out[batchAttrsOffset:], codec)
	binary.BigEndian.PutUint32(out[batchCRCOffset:], crc32.Checksum(out[batchAttrsOffset:], crc32c))
	return out
}

func TestCompressedBatches(t *testing.T) {
	recs := sampleRecords()
	plain := AppendBatch(nil, recs)
	codecs := map[string]struct {
		codec uint16
		f     func([]byte) []byte
	}{
		"gzip": {1, func(b []byte) []byte {
			var w bytes.Buffer
			zw := gzip.NewWriter(&w)
			zw.Write(b)
			zw.Close()
			return w.Bytes()
		}},
		"snappy": {2, func(b []byte) []byte { return s2.EncodeSnappy(nil, b) }},
		"snappy-xerial": {2, func(b []byte) []byte {
			out := append([]byte(nil), xerialHeader...)
			out = append(out, 0, 0, 0, 1, 0, 0, 0, 1) // version, compatible version
			blk := s2.EncodeSnappy(nil, b)
			out = binary.BigEndian.AppendUint32(out, uint32(len(blk)))
			return append(out, blk...)
		}},
		"lz4": {3, func(b []byte) []byte {
			var w bytes.Buffer
			zw := lz4.NewWriter(&w)
			zw.Write(b)
			zw.Close()
			return w.Bytes()
		}},
		"zstd": {4, func(b []byte) []byte {
			enc, _ := zstd.NewWriter(nil)
			defer enc.Close()
			return enc.EncodeAll(b, nil)
		}},
	}
	for name, c := range codecs {
		t.Run(name, func(t *testing.T) {
			buf := recompress(t, plain, c.codec, c.f)
			checkSame(t, decodeAll(t, buf), recs, 0)
		})
	}
}

func TestControlBatchSkipped(t *testing.T) {
	b := AppendBatch(nil, sampleRecords())
	binary.BigEndian.PutUint16(b[batchAttrsOffset:], 0x20)
	binary.BigEndian.PutUint32(b[batchCRCOffset:], crc32.Checksum(b[batchAttrsOffset:], crc32c))
	if got := decodeAll(t, b); len(got) != 0 {
		t.Fatalf("control batch yielded %d records", len(got))
	}
}

func BenchmarkAppendBatch(b *testing.B) {
	recs := sampleRecords()
	buf := AppendBatch(nil, recs)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendBatch(buf[:0], recs)
	}
}

func FuzzRecordBatch(f *testing.F) {
	f.Add(AppendBatch(nil, sampleRecords()))
	f.Add(AppendBatch(AppendBatch(nil, sampleRecords()[:1]), nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		n := 0
		_ = DecodeBatches(b, func(r Record) error {
			n += len(r.Key) + len(r.Value)
			return nil
		})
	})
}

// FuzzRecordBatchBody fuzzes the records section (and its decompression) behind a
// valid header and CRC, which random input would almost never reach.
func FuzzRecordBatchBody(f *testing.F) {
	plain := AppendBatch(nil, sampleRecords())
	f.Add(uint8(0), int32(3), plain[batchHeaderLen:])
	f.Add(uint8(2), int32(3), s2.EncodeSnappy(nil, plain[batchHeaderLen:]))
	f.Add(uint8(4), int32(1), []byte{0x28, 0xb5, 0x2f, 0xfd})
	f.Fuzz(func(t *testing.T, codec uint8, count int32, body []byte) {
		b := append([]byte(nil), plain[:batchHeaderLen]...)
		b = append(b, body...)
		binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
		binary.BigEndian.PutUint16(b[batchAttrsOffset:], uint16(codec%5))
		binary.BigEndian.PutUint32(b[57:], uint32(count))
		binary.BigEndian.PutUint32(b[batchCRCOffset:], crc32.Checksum(b[batchAttrsOffset:], crc32c))
		_ = DecodeBatches(b, func(Record) error { return nil })
	})
}
