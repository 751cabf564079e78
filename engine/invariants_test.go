package engine

import (
	"strings"
	"testing"

	"github.com/samsa-broker/samsa/internal/invariants"
)

// mustPanic runs f and fails unless it panics with a message holding want (the
// name of the invariant broken).
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic; want one naming %q", want)
		}
		if msg, _ := r.(string); !strings.Contains(msg, want) {
			t.Fatalf("panic %v; want one naming %q", r, want)
		}
	}()
	f()
}

// appendOf concatenates batches of the given record counts, stamped at the given
// base offsets.
func appendOf(records []int, bases []int64) []byte {
	var b []byte
	for i, n := range records {
		one := makeBatch(testBatch{records: n, valueSize: 8})
		stampBatch(one, bases[i], 0)
		b = append(b, one...)
	}
	return b
}

// TestCheckAppendOffsets: the check behind the invariants tag in append takes what
// assignOffsets gives (a leader's dense offsets, a follower's with holes) and
// panics, naming the invariant, at offsets that go back, repeat, or skip on a
// leader's append.
func TestCheckAppendOffsets(t *testing.T) {
	const dense = "offsets of an append dense and increasing"
	// A leader append as assignOffsets stamps it, from the log end 10.
	b := appendOf([]int{3, 1, 2}, []int64{0, 0, 0})
	first, next, err := assignOffsets(b, false, 1, CreateTime, 0, 10)
	if err != nil || first != 10 || next != 16 {
		t.Fatalf("assignOffsets = %d, %d, %v; want 10, 16, nil", first, next, err)
	}
	checkAppendOffsets(b, false, 10, first, next)

	// A follower's batches with holes (a compacted leader's), from the log end 10.
	f := appendOf([]int{3, 1}, []int64{12, 20})
	first, next, err = assignOffsets(f, true, 0, CreateTime, 0, 10)
	if err != nil || first != 12 || next != 21 {
		t.Fatalf("follower assignOffsets = %d, %d, %v; want 12, 21, nil", first, next, err)
	}
	checkAppendOffsets(f, true, 10, first, next)

	cases := []struct {
		name     string
		records  []int
		bases    []int64
		follower bool
		leo      int64
		first    int64
		next     int64
	}{
		{"leader: a hole between batches", []int{3, 1}, []int64{10, 14}, false, 10, 10, 15},
		{"leader: batches overlap", []int{3, 1}, []int64{10, 12}, false, 10, 10, 13},
		{"leader: first batch past the log end", []int{1}, []int64{11}, false, 10, 11, 12},
		{"leader: first batch below the log end", []int{1}, []int64{9}, false, 10, 9, 10},
		{"follower: batch below the previous end", []int{3, 1}, []int64{10, 11}, true, 10, 10, 12},
		{"follower: first batch below the log end", []int{2}, []int64{8}, true, 10, 8, 10},
		{"end not the last batch's", []int{2}, []int64{10}, false, 10, 10, 13},
		{"first not the first batch's", []int{2}, []int64{10}, true, 10, 11, 12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := appendOf(c.records, c.bases)
			mustPanic(t, dense, func() { checkAppendOffsets(b, c.follower, c.leo, c.first, c.next) })
		})
	}
}

// TestCheckHighWatermark: a high watermark past the log end panics, naming the
// invariant; at or below it, nothing happens.
func TestCheckHighWatermark(t *testing.T) {
	tp := TopicPartition{"t", 0}
	checkHighWatermark(tp, "set", 5, 5)
	checkHighWatermark(tp, "set", 0, 5)
	mustPanic(t, "high watermark <= log end offset", func() { checkHighWatermark(tp, "set", 6, 5) })
}

// TestSegmentRefcountInvariant: in an invariants build, a release past the last
// reference and a pin of a segment no longer referenced panic, naming the
// invariant. (The ordinary build compiles the checks out.)
func TestSegmentRefcountInvariant(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("the refcount checks are compiled in with -tags invariants only")
	}
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	dir := t.TempDir()
	cfg := DefaultLogConfig()
	s, err := createSegment(m, dir, 0, &cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	s.pin()
	s.release()
	if n := s.refs.Load(); n != 1 {
		t.Fatalf("refs = %d after a pin and its release; want 1", n)
	}
	s.release() // the owner's reference: the files are closed
	mustPanic(t, "segment refcount never below zero", s.release)
	s.refs.Store(0)
	mustPanic(t, "a segment is pinned only while referenced", s.pin)
}

// TestInvariantsHoldThroughTheLog: appends (a leader's, with LogAppendTime, and a
// follower's with holes), a high watermark, retention and a truncation pass the
// checks an invariants build compiles in (the ordinary build runs the same steps
// without them).
func TestInvariantsHoldThroughTheLog(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 4 << 10
	cfg.TimestampType = LogAppendTime
	l, err := m.CreateLog(TopicPartition{"inv", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var cut int64 // a batch's base, to truncate to
	for i := 0; i < 50; i++ {
		r := mustAppend(t, l, appendOf([]int{1 + i%3, 2}, []int64{0, 0}))
		if i == 45 {
			cut = r.BaseOffset
		}
	}
	leo := l.LogEndOffset()
	if leo != 50*2+50+49 { // 1+i%3 over i<50: 99 records, plus 2 per append
		t.Fatalf("log end %d; want %d", leo, 50*2+50+49)
	}
	l.SetHighWatermark(leo + 100)
	if hw := l.HighWatermark(); hw != leo {
		t.Fatalf("high watermark %d; want it clamped to the log end %d", hw, leo)
	}
	if _, err := l.DeleteRecordsBefore(leo / 2); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	if hw, end := l.HighWatermark(), l.LogEndOffset(); hw != end || end != cut {
		t.Fatalf("after truncation: high watermark %d, log end %d; want both %d", hw, end, cut)
	}

	f, err := m.CreateLog(TopicPartition{"inv", 1}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Append(appendOf([]int{2, 1}, []int64{5, 9}), AppendOptions{Follower: true})
	if err != nil || res.BaseOffset != 5 || res.LastOffset != 9 || f.LogEndOffset() != 10 {
		t.Fatalf("follower append = %+v, %v, log end %d; want 5..9, log end 10", res, err, f.LogEndOffset())
	}
}
