package group

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/samsa-broker/samsa/engine"
)

func sampleRecords() []Record {
	return []Record{
		{Timestamp: 1000, Key: AppendOffsetKey(nil, "g", "t", 0), Value: AppendOffsetValue(nil, OffsetValue{Version: 3, Offset: 5, LeaderEpoch: 1, CommitTimestamp: 1000})},
		{Timestamp: 1003, Key: AppendGroupKey(nil, "g"), Value: nil},
		{Timestamp: 999, Key: []byte("k"), Value: []byte{}},
	}
}

// appendOffsetsBatch is what ReplicatedLog.Append writes for recs.
func appendOffsetsBatch(t testing.TB, dst []byte, recs []Record) []byte {
	t.Helper()
	b, err := engine.AppendRecords(dst, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeAll(t *testing.T, buf []byte) []Record {
	t.Helper()
	var out []Record
	err := decodeBatches(buf, func(r Record) error {
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
	buf := appendOffsetsBatch(t, nil, recs)
	buf = appendOffsetsBatch(t, buf, recs[:1])
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
	if err := decodeBatches(bad, func(Record) error { return nil }); !errors.Is(err, ErrCorrupt) || !errors.Is(err, engine.ErrCorrupt) {
		t.Fatalf("corrupt batch: %v", err)
	}
	// fn's error comes back as it is
	stop := errors.New("stop")
	if err := decodeBatches(buf, func(Record) error { return stop }); err != stop {
		t.Fatalf("fn's error: %v", err)
	}
}

// Batch header fields the tests below rewrite.
const (
	testCRCOffset   = 17
	testAttrsOffset = 21
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recompress rewrites an uncompressed batch with its records compressed by codec.
func recompress(t *testing.T, batch []byte, codec uint16, compress func([]byte) []byte) []byte {
	t.Helper()
	body := compress(batch[engine.BatchHeaderSize:])
	out := append([]byte(nil), batch[:engine.BatchHeaderSize]...)
	out = append(out, body...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint16(out[testAttrsOffset:], codec)
	binary.BigEndian.PutUint32(out[testCRCOffset:], crc32.Checksum(out[testAttrsOffset:], castagnoli))
	return out
}

// TestCompressedBatches reads batches compressed by each codec's own writer, as a
// Kafka coordinator with offsets.topic.compression.codec set writes them.
func TestCompressedBatches(t *testing.T) {
	recs := sampleRecords()
	plain := appendOffsetsBatch(t, nil, recs)
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
			out := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}
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
	b := appendOffsetsBatch(t, nil, sampleRecords())
	binary.BigEndian.PutUint16(b[testAttrsOffset:], 0x20)
	binary.BigEndian.PutUint32(b[testCRCOffset:], crc32.Checksum(b[testAttrsOffset:], castagnoli))
	if got := decodeAll(t, b); len(got) != 0 {
		t.Fatalf("control batch yielded %d records", len(got))
	}
}

// goldenRecords cover the varint widths of the record fields: timestamp deltas
// negative, of one byte and of two, and past 32 bits; keys and values null, empty, of
// 63 and 64 bytes (one-byte and two-byte lengths), and records of either length.
func goldenRecords() []Record {
	return append(sampleRecords(),
		Record{Timestamp: 1064, Key: bytes.Repeat([]byte{'a'}, 63), Value: bytes.Repeat([]byte{'b'}, 64)},
		Record{Timestamp: 1000 + 1<<40, Key: nil, Value: []byte("v")},
		Record{Timestamp: 936, Key: AppendOffsetKey(nil, "group-1", "topic-1", 1<<20), Value: AppendOffsetValue(nil,
			OffsetValue{Version: 1, Offset: 1 << 40, Metadata: "md", CommitTimestamp: 936, ExpireTimestamp: 2000})},
	)
}

// goldenOffsetsBatch is the batch of goldenRecords, as group.AppendBatch (the group's
// own encoder, before the engine's codec replaced it) wrote it: compared with that
// encoder over these and 2,000 random record sets, byte for byte, when the engine's
// took over.
const goldenOffsetsBatch = "" +
	"000000000000000000000143ffffffff02d271a35100000000000500000000000003e800000100000003e8ffffffffff" +
	"ffffffffffffffffff000000065400000018000100016700017400000000300003000000000000000500000001000000" +
	"000000000003e800160006020a000200016701000e000104026b00008e02008001067e61616161616161616161616161" +
	"616161616161616161616161616161616161616161616161616161616161616161616161616161616161616161616161" +
	"616180016262626262626262626262626262626262626262626262626262626262626262626262626262626262626262" +
	"6262626262626262626262626262626262626262001800808080808040080102760078007f0a300001000767726f7570" +
	"2d310007746f7069632d31001000003c0001000001000000000000026d6400000000000003a800000000000007d000"

// TestOffsetsBatchGolden checks that ReplicatedLog writes to __consumer_offsets, for
// the same records, the bytes the group coordinator wrote before, and reads them back.
func TestOffsetsBatchGolden(t *testing.T) {
	got := appendOffsetsBatch(t, nil, goldenRecords())
	if want, _ := hex.DecodeString(goldenOffsetsBatch); !bytes.Equal(got, want) {
		t.Fatalf("batch of goldenRecords:\n%x\nwant\n%x", got, want)
	}
	checkSame(t, decodeAll(t, got), goldenRecords(), 0)
}

// offsetCommitRecords are the records of an OffsetCommit of n partitions.
func offsetCommitRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		v := OffsetValue{Version: 3, Offset: int64(1000 + i), LeaderEpoch: 5, CommitTimestamp: 1_700_000_000_000, ExpireTimestamp: -1}
		recs[i] = Record{Timestamp: v.CommitTimestamp, Key: AppendOffsetKey(nil, "benchmark-group", "benchmark-topic", int32(i)), Value: AppendOffsetValue(nil, v)}
	}
	return recs
}

// BenchmarkAppendOffsetCommits builds the batch ReplicatedLog.Append writes for an
// OffsetCommit of 100 partitions: into a new buffer, as Append does, and into a
// reused one. (Against group.AppendBatch, the encoder the engine's replaced, with
// benchstat over -count=6 on 2 shared cores: into=new 5.72µs → 5.07µs and 13.3 KiB →
// 8.0 KiB a batch, one allocation either way; into=reused 2.04µs → 2.27µs, none.)
func BenchmarkAppendOffsetCommits(b *testing.B) {
	recs := offsetCommitRecords(100)
	size := len(appendOffsetsBatch(b, nil, recs))
	b.Run("into=new", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := engine.AppendRecords(nil, recs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("into=reused", func(b *testing.B) {
		buf := appendOffsetsBatch(b, nil, recs)
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = engine.AppendRecords(buf[:0], recs)
		}
	})
}
