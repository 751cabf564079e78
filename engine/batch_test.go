package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
)

func recrc(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

func TestValidateBatch(t *testing.T) {
	good := makeBatch(testBatch{records: 4, valueSize: 10, baseTs: 5, tsStep: 1})
	mod := func(f func(b []byte) []byte) []byte {
		b := append([]byte(nil), good...)
		return f(b)
	}
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"good", good, nil},
		{"compressed (payload not decoded)", mod(func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[offAttributes:], 4) // zstd
			b[BatchHeaderSize] = 0x7E                        // records not walked
			return recrc(b)
		}), nil},
		{"empty", nil, ErrCorruptBatch},
		{"short header", good[:40], ErrCorruptBatch},
		{"truncated", good[:len(good)-1], ErrCorruptBatch},
		{"magic 1", mod(func(b []byte) []byte { b[offMagic] = 1; return b }), ErrUnsupportedMagic},
		{"magic 3", mod(func(b []byte) []byte { b[offMagic] = 3; return b }), ErrUnsupportedMagic},
		{"length below header", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offLength:], 10); return b }), ErrCorruptBatch},
		{"negative length", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offLength:], 0xFFFFFFF0); return b }), ErrCorruptBatch},
		{"huge length", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offLength:], 1<<30); return b }), ErrCorruptBatch},
		{"crc", mod(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrCorruptBatch},
		{"crc field", mod(func(b []byte) []byte { b[offCRC] ^= 1; return b }), ErrCorruptBatch},
		{"count zero", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offNumRecords:], 0); return recrc(b) }), ErrInvalidRecord},
		{"count vs delta", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offNumRecords:], 3); return recrc(b) }), ErrInvalidRecord},
		{"negative delta", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 0xFFFFFFFF); return recrc(b) }), ErrInvalidRecord},
		{"record overrun", mod(func(b []byte) []byte { b[BatchHeaderSize] = 0x7E; return recrc(b) }), ErrInvalidRecord},
		{"bad codec", mod(func(b []byte) []byte { binary.BigEndian.PutUint16(b[offAttributes:], 7); return recrc(b) }), ErrInvalidRecord},
		{"producer without epoch", mod(func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[offProducerID:], 7)
			binary.BigEndian.PutUint16(b[offProducerEpoch:], 0xFFFF)
			return recrc(b)
		}), ErrInvalidRecord},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ValidateBatch(tc.b)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				if h.NumRecords != 4 || h.LastOffsetDelta != 3 || h.MaxTimestamp != 8 || h.Size() != int64(len(good)) {
					t.Fatalf("header %+v", h)
				}
				return
			}
			if !isErr(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if isErr(tc.want, ErrCorruptBatch) && !isErr(err, ErrCorrupt) {
				t.Fatalf("%v does not match ErrCorrupt", err)
			}
		})
	}
}

func TestValidateBatchNoAllocs(t *testing.T) {
	b := makeBatch(testBatch{records: 50, valueSize: 100})
	if n := testing.AllocsPerRun(100, func() { ValidateBatch(b) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}

func TestSequenceWrap(t *testing.T) {
	if got := lastSequence(2147483647, 2); got != 0 {
		t.Fatalf("lastSequence wrap: %d", got)
	}
	if got := nextSequence(2147483647); got != 0 {
		t.Fatalf("nextSequence wrap: %d", got)
	}
}

func FuzzRecordBatchHeader(f *testing.F) {
	f.Add(makeBatch(testBatch{records: 2, valueSize: 3}))
	f.Add(makeBatch(testBatch{records: 1, pid: 5, epoch: 1, seq: 9}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseBatchHeader(b)
		if err == nil && (h.Magic != 2 || h.Length < BatchHeaderSize-logOverhead) {
			t.Fatalf("accepted %+v", h)
		}
		h2, err2 := ValidateBatch(b)
		if err2 == nil {
			if err != nil || h2 != h || int64(len(b)) < h2.Size() || h2.NumRecords <= 0 {
				t.Fatalf("validated inconsistent header %+v (%v)", h2, err)
			}
			recordTimestamps(b[:h2.Size()], func(o, ts int64) bool { return true })
		}
	})
}

// TestBatchesEnd: the end of the whole batches at the start of a read's bytes, a cut
// batch and a header too short for a batch left out.
func TestBatchesEnd(t *testing.T) {
	a := makeBatch(testBatch{records: 3})
	b := makeBatch(testBatch{records: 2})
	binary.BigEndian.PutUint64(b[offBaseOffset:], 3)
	two := append(append([]byte{}, a...), b...)
	for _, tc := range []struct {
		name string
		in   []byte
		want int64
	}{
		{"empty", nil, -1},
		{"one", a, 3},
		{"two", two, 5},
		{"the second cut", two[:len(two)-1], 3},
		{"a cut header", two[:len(a)+BatchHeaderSize-1], 3},
		{"the first cut", a[:len(a)-1], -1},
	} {
		if got := BatchesEnd(tc.in); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// BenchmarkValidateBatch is the produce path's check of one batch: the CRC and
// the walk over the records' lengths. records=4096 is samsa-bench's raw mode
// batch (100-byte values), records=16 a small client batch.
func BenchmarkValidateBatch(b *testing.B) {
	for _, n := range []int{16, 4096} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			batch := makeBatch(testBatch{records: n, valueSize: 100})
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ValidateBatch(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecordFraming is the walk over the records' lengths alone.
func BenchmarkRecordFraming(b *testing.B) {
	batch := makeBatch(testBatch{records: 4096, valueSize: 100})
	h := parseHeaderUnchecked(batch)
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		if err := checkRecordFraming(&h, batch[BatchHeaderSize:]); err != nil {
			b.Fatal(err)
		}
	}
}

// refRecordFraming is the record-length walk with binary.Varint for every
// record: checkRecordFraming's inline decoding must agree with it.
func refRecordFraming(n int32, records []byte) bool {
	p := 0
	for i := int32(0); i < n; i++ {
		l, w := binary.Varint(records[p:])
		if w <= 0 || l <= 0 || l > int64(len(records)-p-w) {
			return false
		}
		p += w + int(l)
	}
	return p == len(records)
}

func checkFramingAgrees(t *testing.T, n int32, records []byte) {
	h := BatchHeader{NumRecords: n, ProducerID: -1}
	if got, want := checkRecordFraming(&h, records) == nil, refRecordFraming(n, records); got != want {
		t.Fatalf("framing of %d records in %d bytes (%x...): accepted %v, binary.Varint says %v", n, len(records), records[:min(len(records), 16)], got, want)
	}
}

func TestRecordFramingInlineVarint(t *testing.T) {
	// Lengths of one, two and three varint bytes, cut anywhere in the first
	// records and around every record's length; a non-canonical two-byte
	// length (0x80 0x00, zero), negative lengths.
	var recs []byte
	var starts []int
	for _, l := range []int{1, 63, 64, 100, 128, 300, 8191, 8192, 20000} {
		starts = append(starts, len(recs))
		recs = binary.AppendVarint(recs, int64(l))
		recs = append(recs, make([]byte, l)...)
	}
	starts = append(starts, len(recs))
	cuts := map[int]bool{}
	for c := 0; c < 300; c++ {
		cuts[c] = true
	}
	for _, st := range starts {
		for c := max(st-2, 0); c <= st+4 && c <= len(recs); c++ {
			cuts[c] = true
		}
	}
	for cut := range cuts {
		for n := int32(0); n <= 8; n++ {
			checkFramingAgrees(t, n, recs[:cut])
		}
	}
	// A negative length whose magnitude would fit: -2 in one byte, -65 in two.
	neg1 := []byte{0x03, 0x00}
	neg2 := append([]byte{0x81, 0x01}, make([]byte, 64)...)
	for _, b := range [][]byte{{0x80, 0x00}, {0x80, 0x00, 0x00}, {0x81, 0x00, 0x00}, {0x02, 0x00}, {0x01, 0x00}, {0x80}, {0xff}, {0xff, 0x7f}, {0x04, 0x00, 0x00}, neg1, neg2} {
		for n := int32(0); n <= 2; n++ {
			checkFramingAgrees(t, n, b)
		}
	}
}

func FuzzRecordFraming(f *testing.F) {
	f.Add(int32(1), []byte{0x02, 0x00})
	f.Add(int32(2), []byte{0x80, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, n int32, records []byte) {
		checkFramingAgrees(t, n%64, records)
	})
}
