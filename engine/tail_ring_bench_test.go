package engine

import (
	"fmt"
	"testing"
)

// BenchmarkTailRead: a reader at the end of a log, as a consumer or follower is: an
// op appends one 1 KiB batch and finds the range that starts at it, through the
// remembered batches (tail_ring.go) or by the index and the file's headers
// (scan, as before them).
//
//	go test -run XXX -bench TailRead -count 6 ./engine
func BenchmarkTailRead(b *testing.B) {
	for _, mode := range []string{"scan", "remembered"} {
		b.Run(fmt.Sprintf("find=%s", mode), func(b *testing.B) {
			m, err := Open(Options{Dirs: []string{benchDir(b)}, Sync: SyncNone})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			l, err := m.CreateLog(TopicPartition{"bench", 0}, DefaultLogConfig())
			if err != nil {
				b.Fatal(err)
			}
			batch := makeBatch(testBatch{records: 1, valueSize: 1024})
			for range 100 {
				mustAppend(b, l, append([]byte(nil), batch...))
			}
			cfg := l.cfg.Load()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := mustAppend(b, l, append(batch[:0:0], batch...))
				segs := l.pinAll()
				s := segs[len(segs)-1]
				var size int64
				var found bool
				if mode == "scan" {
					_, size, found, err = s.scanRange(r.BaseOffset, 1<<20, r.LastOffset+1, true, s.size.Load(), cfg)
				} else {
					_, size, found, err = s.findRange(r.BaseOffset, 1<<20, r.LastOffset+1, true, cfg)
				}
				releaseAll(segs)
				if err != nil || !found || size != int64(len(batch)) {
					b.Fatalf("found %v size %d err %v", found, size, err)
				}
			}
		})
	}
}
