package engine

import (
	"math/rand"
	"testing"
)

// TestTailRangeMatchesScan: wherever the remembered batches answer a read, they
// answer what the scan of the file does, over batches of random sizes, offsets with
// gaps (a follower's batches of a compacted leader), every start offset around the
// tail, and random byte limits, high watermarks and minOne; after a truncation and
// a roll nothing stale is remembered.
func TestTailRangeMatchesScan(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 256 << 10
	l, err := m.CreateLog(TopicPartition{"tail", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	next := int64(0)
	appendSome := func(n int) {
		for range n {
			b := makeBatch(testBatch{records: 1 + rng.Intn(5), valueSize: rng.Intn(900)})
			if rng.Intn(4) == 0 {
				next += int64(rng.Intn(3)) // a gap in offsets
			}
			stampBatch(b, next, 1)
			r, err := l.Append(b, AppendOptions{Follower: true})
			if err != nil {
				t.Fatal(err)
			}
			next = r.LastOffset + 1
		}
	}
	answered := 0
	check := func(what string) {
		t.Helper()
		segs := l.pinAll()
		defer releaseAll(segs)
		c := l.cfg.Load()
		for _, s := range segs {
			limit := s.size.Load()
			for off := max(s.base, s.next.Load()-120); off <= s.next.Load(); off++ {
				for range 8 {
					maxBytes := int64(1 + rng.Intn(6000))
					upTo := s.next.Load() - int64(rng.Intn(10))
					minOne := rng.Intn(2) == 0
					ts, tsz, ok := s.tailRange(off, maxBytes, upTo, minOne, limit)
					if !ok {
						continue
					}
					answered++
					ss, ssz, found, err := s.scanRange(off, maxBytes, upTo, minOne, limit, c)
					if err != nil || !found || ss != ts || ssz != tsz {
						t.Fatalf("%s: segment %d, read at %d (max %d, upTo %d, minOne %v): remembered %d+%d, scanned %d+%d found %v err %v",
							what, s.base, off, maxBytes, upTo, minOne, ts, tsz, ss, ssz, found, err)
					}
				}
			}
		}
	}
	appendSome(300)
	check("after appends")
	if segmentCount(l) < 2 {
		t.Fatal("no roll")
	}
	if err := l.TruncateTo(next - 20); err != nil {
		t.Fatal(err)
	}
	next = l.LogEndOffset()
	check("after a truncation")
	appendSome(3) // the stale batches would still be remembered beside these
	check("after a few appends past the truncation")
	appendSome(30)
	check("after appends past the truncation")
	if answered < 500 {
		t.Fatalf("the remembered batches answered %d reads: the test checks too little", answered)
	}
}
