package bench

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAppendRecordBatch(t *testing.T) {
	value := []byte("hello, batch")
	b := AppendRecordBatch([]byte{0xAA}, 5, value, 1700000000000)[1:]
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if rb.Magic != 2 || rb.NumRecords != 5 || rb.LastOffsetDelta != 4 || int(rb.Length) != len(b)-12 || rb.ProducerID != -1 || rb.FirstTimestamp != 1700000000000 {
		t.Fatalf("header %+v", rb)
	}
	if got := crc32.Checksum(b[21:], crc32c); int32(got) != rb.CRC {
		t.Fatalf("crc %x, header says %x", got, uint32(rb.CRC))
	}
	recs := rb.Records
	for i := 0; i < 5; i++ {
		var r kmsg.Record
		if err := r.ReadFrom(recs); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if int(r.OffsetDelta) != i || string(r.Value) != string(value) || r.Key != nil {
			t.Fatalf("record %d: %+v", i, r)
		}
		_, n := binary.Varint(recs)
		recs = recs[n+int(r.Length):]
	}
	if len(recs) != 0 {
		t.Fatalf("%d trailing bytes", len(recs))
	}
}

func TestScanBatches(t *testing.T) {
	b1 := AppendRecordBatch(nil, 3, make([]byte, 10), 0)
	b2 := AppendRecordBatch(nil, 7, make([]byte, 10), 0)
	binary.BigEndian.PutUint64(b1, 100)
	binary.BigEndian.PutUint64(b2, 103)
	all := append(append([]byte(nil), b1...), b2...)
	n, bytes, next := scanBatches(all)
	if n != 10 || bytes != int64(len(all)) || next != 110 {
		t.Fatalf("whole: %d records %d bytes next %d", n, bytes, next)
	}
	// A fetch may end inside a batch: only whole batches count.
	n, _, next = scanBatches(all[:len(all)-5])
	if n != 3 || next != 103 {
		t.Fatalf("partial: %d records next %d", n, next)
	}
	if n, _, next := scanBatches(nil); n != 0 || next != -1 {
		t.Fatal("empty")
	}
}

func FuzzScanBatches(f *testing.F) {
	f.Add(AppendRecordBatch(nil, 2, []byte("x"), 0))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, bytes, _ := scanBatches(b)
		if bytes > int64(len(b)) || n < 0 {
			t.Fatalf("scanned %d bytes of %d", bytes, len(b))
		}
	})
}
