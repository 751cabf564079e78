package engine

import (
	"bytes"
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
