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
	recs := engine.BuffersOf(big1, small, big2)
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

// countedRef counts the references to memory lent to a Buffers.
type countedRef struct{ refs int }

func (r *countedRef) Retain()  { r.refs++ }
func (r *countedRef) Release() { r.refs-- }

// Records in memory whose buffers are lent (engine.Buffers.Hold) are held by
// the frame that takes them over until the frame is released (after the
// transport wrote or dropped the answer), then released once.
func TestFetchFrameReleasesLentRecords(t *testing.T) {
	big, small := bytes.Repeat([]byte{1}, 20<<10), []byte("small")
	ref := &countedRef{refs: 1}
	recs := engine.BuffersOf(big, small)
	recs.Hold(ref)
	fr := GetFetchFrame()
	p := &FetchPartition{Partition: 1, RecordBytes: recs}
	fr.SetBytes(fr.AppendPartition(fr.Bytes(), 16, false, p))
	if p.RecordBytes.Len() != 0 {
		t.Fatalf("AppendPartition left the records with the caller: %d bytes", p.RecordBytes.Len())
	}
	r := fr.Response()
	if ref.refs != 1 || r.Size() < int64(len(big)+len(small)) {
		t.Fatalf("framed: %d references (want 1, the frame's), an answer of %d bytes", ref.refs, r.Size())
	}
	fr.Release()
	if ref.refs != 0 {
		t.Fatalf("the frame released: %d references left, want 0", ref.refs)
	}
}
