package engine

import (
	"testing"
	"time"
)

func TestFsyncHistBuckets(t *testing.T) {
	var d logDir
	for _, v := range []time.Duration{10 * time.Microsecond, 50 * time.Microsecond, 51 * time.Microsecond, 3 * time.Millisecond, time.Minute} {
		d.fsyncHist.observe(v)
	}
	m := &Manager{dirs: []*logDir{&d}}
	h := m.FsyncHistogram()
	if h.Count != 5 || h.Sum != 10*time.Microsecond+50*time.Microsecond+51*time.Microsecond+3*time.Millisecond+time.Minute {
		t.Fatalf("count %d sum %v", h.Count, h.Sum)
	}
	// 50µs: two; 100µs: three; 3.2ms (50µs<<6): four; the minute only in Count.
	for i, want := range map[int]uint64{0: 2, 1: 3, 5: 3, 6: 4, len(FsyncBuckets) - 1: 4} {
		if h.Buckets[i] != want {
			t.Errorf("bucket %d (le %v) = %d, want %d", i, FsyncBuckets[i], h.Buckets[i], want)
		}
	}
}
