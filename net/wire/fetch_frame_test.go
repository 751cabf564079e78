package wire

import (
	"bytes"
	"testing"

	"github.com/samsa-broker/samsa/engine"
)

// Records read from remote storage (RecordBytes) go on the wire as the
// concatenation of their slices after the partition's fields, for the
// flexible versions and the others: the large slices as chunks of their own,
// the bytes where they lie (not copied), the small ones copied into the
// buffer.
func TestFetchFrameRecordBytes(t *testing.T) {
	big1, small, big2 := bytes.Repeat([]byte{1}, 20<<10), []byte("small"), bytes.Repeat([]byte{2}, 30<<10)
	recs := engine.Buffers{big1, small, big2}
	for _, v := range []int16{4, 16} {
		fr := GetFetchFrame()
		b := fr.AppendPartition(fr.Bytes(), v, false, &FetchPartition{Partition: 3, HighWatermark: 9, LastStableOffset: 9, LogStartOffset: 1, RecordBytes: recs})
		b = append(b, 0xee)
		fr.SetBytes(b)
		r := fr.Response()

		flex := v >= 12
		want := AppendI32(nil, 3)
		want = AppendI16(want, 0)
		want = AppendI64(want, 9)
		want = AppendI64(want, 9)
		if v >= 5 {
			want = AppendI64(want, 1)
		}
		want = AppendArrayLen(want, flex, -1)
		if v >= 11 {
			want = AppendI32(want, -1)
		}
		want = AppendBytesLen(want, flex, int32(recs.Len()))
		want = append(want, recs.Bytes()...)
		if flex {
			want = append(want, 0)
		}
		want = append(want, 0xee)

		var got []byte
		spliced := 0
		for _, c := range r.Chunks {
			if c.File != nil {
				t.Fatalf("v%d: a file range in an answer of bytes in memory", v)
			}
			if len(c.Bytes) > 0 && (&c.Bytes[0] == &big1[0] || &c.Bytes[0] == &big2[0]) {
				spliced++
			}
			got = append(got, c.Bytes...)
		}
		if !bytes.Equal(got, want) || r.Size() != int64(len(want)) {
			t.Fatalf("v%d: %d bytes (size %d), want %d", v, len(got), r.Size(), len(want))
		}
		if spliced != 2 || len(r.Chunks) != 5 {
			t.Fatalf("v%d: %d chunks, %d of them the records' large slices: want 5 and 2", v, len(r.Chunks), spliced)
		}
		fr.Release()
	}
}
