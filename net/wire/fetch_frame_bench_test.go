package wire

import (
	"testing"

	"github.com/samsa-broker/samsa/engine"
)

// BenchmarkFetchFrameRemote frames a Fetch answer (v16) of six partitions of
// 8 MiB each read from remote storage, as tiered-catchup's consumer gets
// them (BENCHMARKS.md): each partition's records as read, the rest of one
// 4 MiB chunk, a whole one and the start of a third.
func BenchmarkFetchFrameRemote(b *testing.B) {
	var parts [6]engine.Buffers
	for i := range parts {
		parts[i] = engine.BuffersOf(make([]byte, 3<<20), make([]byte, 4<<20), make([]byte, 1<<20))
	}
	b.SetBytes(6 * 8 << 20)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		fr := GetFetchFrame()
		bb := AppendI32(fr.Bytes(), 1) // correlation id
		bb = append(bb, 0)
		bb = AppendArrayLen(bb, true, 1)
		bb = append(bb, make([]byte, 16)...) // topic id
		bb = AppendArrayLen(bb, true, len(parts))
		for i := range parts {
			bb = fr.AppendPartition(bb, 16, false, &FetchPartition{Partition: int32(i), RecordBytes: parts[i]})
		}
		bb = append(bb, 0)
		fr.SetBytes(AppendFetchTags(bb, nil))
		r := fr.Response()
		if r.Size() < 6*8<<20 {
			b.Fatalf("an answer of %d bytes", r.Size())
		}
		fr.Release()
	}
}
