package engine

import (
	"sort"
	"time"
)

// FsyncBuckets are the upper bounds of FsyncHistogram's buckets: 50 µs to about
// 6.5 s, doubling (the broker's request-latency buckets).
var FsyncBuckets = func() []time.Duration {
	b := make([]time.Duration, fsyncBucketCount)
	d := 50 * time.Microsecond
	for i := range b {
		b[i] = d
		d *= 2
	}
	return b
}()

const fsyncBucketCount = 18

// fsyncHist counts fdatasync latencies in FsyncBuckets (cumulative at read), for a
// Prometheus histogram. Safe for concurrent use without a lock.
type fsyncHist struct{ bucketCounts }

func (h *fsyncHist) observe(d time.Duration) {
	h.add(sort.Search(len(FsyncBuckets), func(i int) bool { return d <= FsyncBuckets[i] }), int64(d))
}

// FsyncHistogram is fdatasync latency since Open over all log directories, in
// Prometheus' form: Buckets[i] counts the syncs that took at most FsyncBuckets[i]
// (cumulative); Count includes those above the last bound.
type FsyncHistogram struct {
	Buckets []uint64
	Count   uint64
	Sum     time.Duration
}

// FsyncHistogram merges the directories' fdatasync latency buckets.
func (m *Manager) FsyncHistogram() FsyncHistogram {
	var per [fsyncBucketCount + 1]uint64
	var sum int64
	for _, d := range m.dirs {
		d.fsyncHist.addTo(per[:], &sum)
	}
	h := cumulative(per[:], 0)
	return FsyncHistogram{Buckets: h.Buckets, Count: h.Count, Sum: time.Duration(sum)}
}
