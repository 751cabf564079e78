package engine

import (
	"sort"
	"sync/atomic"
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
type fsyncHist struct {
	counts [fsyncBucketCount + 1]atomic.Uint64 // per bucket; the last is +Inf
	sumNs  atomic.Int64
}

func (h *fsyncHist) observe(d time.Duration) {
	i := sort.Search(len(FsyncBuckets), func(i int) bool { return d <= FsyncBuckets[i] })
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
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
		for i := range per {
			per[i] += d.fsyncHist.counts[i].Load()
		}
		sum += d.fsyncHist.sumNs.Load()
	}
	h := FsyncHistogram{Buckets: make([]uint64, len(FsyncBuckets)), Sum: time.Duration(sum)}
	var c uint64
	for i := range FsyncBuckets {
		c += per[i]
		h.Buckets[i] = c
	}
	h.Count = c + per[len(FsyncBuckets)]
	return h
}
