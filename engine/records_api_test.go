package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
)

func TestAppendRecordsForEachRecord(t *testing.T) {
	recs := []Record{{Timestamp: 10, Key: []byte("a"), Value: []byte("1")}, {Timestamp: 12, Key: []byte("b")}, {Timestamp: 11, Value: []byte{}}}
	b, err := AppendRecords(nil, recs)
	if err != nil {
		t.Fatal(err)
	}
	stampBatch(b, 100, 0)
	var got []Record
	if err := ForEachRecord(b, func(r Record) error {
		r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
		got = append(got, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Offset != 100 || got[2].Offset != 102 || string(got[0].Key) != "a" || got[1].Value != nil ||
		got[2].Key != nil || got[2].Value == nil || got[1].Timestamp != 12 {
		t.Fatalf("records %+v", got)
	}
	// Compressed batches are read; control batches skipped.
	c := keyedBatch(t, []kv{{key: "z", value: []byte("zz")}}, batchOpts{codec: codecZstd, baseTs: 5})
	n := 0
	if err := ForEachRecord(c, func(r Record) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("compressed: %d records, %v", n, err)
	}
	if err := ForEachRecord(AppendMarkerBatch(nil, Marker{ProducerID: 1}), func(Record) error { t.Fatal("control record"); return nil }); err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := ForEachRecord(b, func(Record) error { return nil }); !isErr(err, ErrCorrupt) {
		t.Fatalf("bad CRC: %v", err)
	}
	if _, err := AppendRecords(nil, nil); err == nil {
		t.Fatal("empty batch")
	}
}

func TestDecodeMarker(t *testing.T) {
	m := Marker{ProducerID: 9, ProducerEpoch: 3, CoordinatorEpoch: 17, Commit: true, Timestamp: 44}
	got, ok, err := DecodeMarker(AppendMarkerBatch(nil, m))
	if err != nil || !ok || got != m {
		t.Fatalf("marker %+v %v %v", got, ok, err)
	}
	if _, _, err := DecodeMarker(makeBatch(testBatch{})); err == nil {
		t.Fatal("a data batch read as a marker")
	}
}

// readBatches builds a read of a log: a plain batch at 10 (3 records), a
// zstd one at 13 (2), a marker at 15, a transactional one at 16 (1), a
// gzip one at 17 (2); and the records ForEachRecordInBatches must yield.
func readBatches(t testing.TB) (buf []byte, want []Record) {
	t.Helper()
	plain, err := AppendRecords(nil, []Record{{Timestamp: 100, Key: []byte("a"), Value: []byte("1")}, {Timestamp: 101, Key: []byte("b")}, {Timestamp: 99, Value: []byte{}}})
	if err != nil {
		t.Fatal(err)
	}
	stampBatch(plain, 10, 0)
	buf = append(buf, plain...)
	want = append(want, Record{Offset: 10, Timestamp: 100, Key: []byte("a"), Value: []byte("1")}, Record{Offset: 11, Timestamp: 101, Key: []byte("b")},
		Record{Offset: 12, Timestamp: 99, Value: []byte{}})
	buf = append(buf, keyedBatch(t, []kv{{key: "z", value: []byte("zz")}, {key: "y", value: nil}}, batchOpts{codec: codecZstd, baseTs: 5, baseOffset: 13})...)
	want = append(want, Record{Offset: 13, Timestamp: 5, Key: []byte("z"), Value: []byte("zz")}, Record{Offset: 14, Timestamp: 6, Key: []byte("y")})
	m := AppendMarkerBatch(nil, Marker{ProducerID: 7, Commit: true})
	stampBatch(m, 15, 0)
	buf = append(buf, m...)
	txn, err := AppendProducerRecords(nil, BatchProducer{ID: 8, Epoch: 1, BaseSequence: -1, Transactional: true}, []Record{{Timestamp: 7, Key: []byte("t"), Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	stampBatch(txn, 16, 0)
	buf = append(buf, txn...)
	want = append(want, Record{Offset: 16, Timestamp: 7, Key: []byte("t"), Value: []byte("x")})
	buf = append(buf, keyedBatch(t, []kv{{key: "g", value: []byte("1")}, {key: "h", value: []byte("2")}}, batchOpts{codec: codecGzip, baseTs: 9, baseOffset: 17})...)
	want = append(want, Record{Offset: 17, Timestamp: 9, Key: []byte("g"), Value: []byte("1")}, Record{Offset: 18, Timestamp: 10, Key: []byte("h"), Value: []byte("2")})
	return buf, want
}

func collectRecords(buf []byte) ([]Record, error) {
	var got []Record
	err := ForEachRecordInBatches(buf, func(r Record) error {
		if r.Key != nil {
			r.Key = bytes.Clone(r.Key)
		}
		if r.Value != nil {
			r.Value = append([]byte{}, r.Value...)
		}
		got = append(got, r)
		return nil
	})
	return got, err
}

func sameRecords(got, want []Record) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.Timestamp != w.Timestamp || (g.Key == nil) != (w.Key == nil) || !bytes.Equal(g.Key, w.Key) ||
			(g.Value == nil) != (w.Value == nil) || !bytes.Equal(g.Value, w.Value) {
			return false
		}
	}
	return true
}

func TestForEachRecordInBatches(t *testing.T) {
	buf, want := readBatches(t)
	got, err := collectRecords(buf)
	if err != nil || !sameRecords(got, want) {
		t.Fatalf("records %+v, %v; want %+v", got, err, want)
	}
	// A read cut anywhere yields the records of the whole batches before
	// the cut, without error.
	var ends []int // end of each batch in buf
	var counts []int
	if err := ForEachBatch(buf, func(h BatchHeader, b []byte) error {
		prev := 0
		if len(ends) > 0 {
			prev = ends[len(ends)-1]
		}
		ends = append(ends, prev+len(b))
		n := 0
		if !h.Control() {
			n = int(h.NumRecords)
		}
		if len(counts) > 0 {
			n += counts[len(counts)-1]
		}
		counts = append(counts, n)
		return nil
	}); err != nil || len(ends) != 5 || ends[4] != len(buf) {
		t.Fatalf("batches end at %v, %v", ends, err)
	}
	for cut := 0; cut <= len(buf); cut++ {
		n := 0
		for i, e := range ends {
			if e <= cut {
				n = counts[i]
			}
		}
		got, err := collectRecords(buf[:cut])
		if err != nil || !sameRecords(got, want[:n]) {
			t.Fatalf("cut at %d: %d records, %v; want %d", cut, len(got), err, n)
		}
	}
	// fn's error stops the walk, unchanged.
	stop := errors.New("stop")
	n := 0
	if err := ForEachRecordInBatches(buf, func(Record) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("fn's error: %v after %d records", err, n)
	}
}

func TestForEachRecordInBatchesCorrupt(t *testing.T) {
	buf, _ := readBatches(t)
	second := int(binary.BigEndian.Uint32(buf[offLength:])) + logOverhead // the zstd batch starts here
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
		also   error // besides ErrCorrupt
	}{
		{"flipped byte", func(b []byte) []byte { b[second+BatchHeaderSize+2] ^= 1; return b }, ErrCorruptBatch},
		{"short length", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[second+offLength:], BatchHeaderSize-logOverhead-1)
			return b
		}, ErrCorruptBatch},
		{"magic 1", func(b []byte) []byte { b[second+offMagic] = 1; return b }, ErrUnsupportedMagic},
		{"preallocated zeros", func(b []byte) []byte { return append(b[:second], make([]byte, 200)...) }, ErrCorruptBatch},
		{"records that do not tile, a good CRC", func(b []byte) []byte {
			b = b[:second]
			bad, err := AppendRecords(nil, []Record{{Key: []byte("k"), Value: []byte("v")}})
			if err != nil {
				t.Fatal(err)
			}
			bad[BatchHeaderSize] += 2 // the record's length now runs past the batch
			binary.BigEndian.PutUint32(bad[offCRC:], crc32.Checksum(bad[offAttributes:], castagnoli))
			return append(b, bad...)
		}, ErrInvalidRecord},
		{"unknown codec, a good CRC", func(b []byte) []byte {
			b = b[:second]
			bad, err := AppendRecords(nil, []Record{{Key: []byte("k"), Value: []byte("v")}})
			if err != nil {
				t.Fatal(err)
			}
			binary.BigEndian.PutUint16(bad[offAttributes:], 5)
			binary.BigEndian.PutUint32(bad[offCRC:], crc32.Checksum(bad[offAttributes:], castagnoli))
			return append(b, bad...)
		}, ErrInvalidRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.damage(bytes.Clone(buf))
			got, err := collectRecords(b)
			if !errors.Is(err, ErrCorrupt) || !errors.Is(err, tc.also) {
				t.Fatalf("error %v, want ErrCorrupt and %v", err, tc.also)
			}
			if len(got) != 3 { // the first batch's, read before the damage
				t.Fatalf("%d records before the damage, want 3", len(got))
			}
		})
	}
}

func TestForEachBatch(t *testing.T) {
	buf, _ := readBatches(t)
	var bases []int64
	if err := ForEachBatch(buf, func(h BatchHeader, b []byte) error {
		if cap(b) != len(b) || int64(len(b)) != h.Size() || int64(binary.BigEndian.Uint64(b)) != h.BaseOffset {
			t.Fatalf("batch at %d: %d bytes, capacity %d, header %+v", h.BaseOffset, len(b), cap(b), h)
		}
		if _, err := validateStoredBatch(b); err != nil {
			t.Fatal(err)
		}
		bases = append(bases, h.BaseOffset)
		return nil
	}); err != nil || fmt.Sprint(bases) != "[10 13 15 16 17]" {
		t.Fatalf("bases %v, %v", bases, err)
	}
	// Framing only: a bad CRC is the reader's to find.
	bad := bytes.Clone(buf)
	bad[len(bad)-1] ^= 1
	n := 0
	if err := ForEachBatch(bad, func(BatchHeader, []byte) error { n++; return nil }); err != nil || n != 5 {
		t.Fatalf("%d batches, %v", n, err)
	}
	if err := ForEachBatch(nil, func(BatchHeader, []byte) error { t.Fatal("a batch in nothing"); return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestAppendRecordsNoAllocs(t *testing.T) {
	recs := []Record{{Timestamp: 1, Key: []byte("key"), Value: bytes.Repeat([]byte("v"), 300)}, {Timestamp: 2, Key: []byte("k2")}}
	b, err := AppendRecords(nil, recs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ValidateBatch(b); err != nil {
		t.Fatal(err)
	}
	if !raceEnabled { // the race detector's instrumentation allocates
		if n := testing.AllocsPerRun(100, func() { AppendRecords(nil, recs) }); n != 1 {
			t.Fatalf("%v allocations for a batch into nil, want 1 (grown once)", n)
		}
		if n := testing.AllocsPerRun(100, func() { b, _ = AppendRecords(b[:0], recs) }); n != 0 {
			t.Fatalf("%v allocations per batch", n)
		}
	}
	// Appending after other bytes leaves them, and the batch is the same.
	two, err := AppendRecords([]byte("xyz"), recs)
	if err != nil || string(two[:3]) != "xyz" || !bytes.Equal(two[3:], b) {
		t.Fatalf("appended after a prefix: %v", err)
	}
}

// FuzzForEachRecordInBatches feeds ForEachRecordInBatches a batch with a
// good CRC around fuzzed records (what random bytes would almost never
// reach), with fuzzed bytes behind it (more batches, a cut one, garbage).
// It must not panic, must report anything malformed as ErrCorrupt, and
// what it yields must lie within the batches ForEachBatch finds. As
// FuzzDecodeRecords, it bounds decompression at 1 MiB (ForEachRecordInBatches:
// 64 MiB), so that an execution allocates little.
func FuzzForEachRecordInBatches(f *testing.F) {
	plain := testPayload(20)
	c := newCodecs(1 << 20)
	for codec := codecNone; codec <= codecZstd; codec++ {
		payload := plain
		if codec != codecNone {
			payload, _ = c.compress(codec, plain, nil, false)
		}
		f.Add(byte(codec), int32(20), int32(19), payload, []byte(nil))
	}
	x, _ := c.compress(codecSnappy, plain, nil, true)
	f.Add(byte(codecSnappy|attrTransactional), int32(20), int32(25), x, []byte(nil))
	buf, _ := readBatches(f)
	f.Add(byte(0), int32(1), int32(0), []byte{0x0e, 0, 0, 0, 2, 'k', 2, 'v', 0}, buf)
	f.Add(byte(attrControl), int32(1), int32(0), []byte{0x0e, 0, 0, 0, 2, 'k', 2, 'v', 0}, buf[:len(buf)-9])
	f.Fuzz(func(t *testing.T, attrs byte, count, last int32, payload, tail []byte) {
		h := BatchHeader{BaseOffset: 1000, LastOffsetDelta: last, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		b := appendBatch(nil, &h, int16(attrs&(attrCompressionMask|attrTransactional|attrControl|attrTimestampType)), 50, 60, count, payload)
		b = append(b, tail...)
		for _, in := range [][]byte{b, tail} {
			type span struct{ first, last int64 }
			var spans []span
			ForEachBatch(in, func(h BatchHeader, _ []byte) error {
				spans = append(spans, span{h.BaseOffset, h.LastOffset()})
				return nil
			})
			i := 0
			err := forEachRecordInBatches(in, 1<<20, func(r Record) error {
				// Batches come in order; their offsets need not.
				for i < len(spans) && (r.Offset < spans[i].first || r.Offset > spans[i].last) {
					i++
				}
				if i == len(spans) {
					t.Fatalf("record at %d outside the batches %v", r.Offset, spans)
				}
				return nil
			})
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
		}
	})
}
