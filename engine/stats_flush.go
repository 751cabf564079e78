package engine

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// The group commit's stages, per log directory, for an operator who wants to know
// where a durable append's wait goes (FlushStats; samsa_engine_flush_* on /metrics):
//
//	append ─▶ OnDurable/WaitDurable (the waiter is queued, the flusher kicked)
//	       ─▶ queue wait: until the round that releases the waiter starts; if
//	          the flusher was idle this is its wake-up (Wakeup), else the rest of
//	          the round in progress and then the wake-up (none when the round in
//	          progress synced the waiter's log after its append and releases it)
//	       ─▶ sync phase: every file of the round synced (segment files, and when
//	          due transaction indexes, the indexes of rolled segments, the
//	          leader-epoch checkpoint, the directory), serially below
//	          flushParallelMin logs, flushParallel at a time above
//	       ─▶ release: every waiter queued by then whose offset is durable
//	          completed, their callbacks run (a produce's answer is queued there)
//
// Each observation is a few atomic adds and at most one clock read: the append path
// reads the clock once per durability waiter and allocates nothing.

// StageBuckets are the upper bounds of the stage histograms' buckets: 5 µs to about
// 5.2 s, doubling.
var StageBuckets = func() []time.Duration {
	b := make([]time.Duration, stageBucketCount)
	d := stageBucketMin
	for i := range b {
		b[i] = d
		d *= 2
	}
	return b
}()

const (
	stageBucketMin   = 5 * time.Microsecond
	stageBucketCount = 21
)

// bucketCounts are a histogram's per-bucket counts (the last one past every bound)
// and sum, kept without a lock; its observer picks the bucket (fsyncHist, stageHist,
// countHist).
type bucketCounts struct {
	counts [maxHistBuckets + 1]atomic.Uint64
	sum    atomic.Int64
}

// maxHistBuckets is the most bounds a bucketCounts histogram has.
const maxHistBuckets = stageBucketCount

// Every histogram's bounds fit (a negative constant does not convert to uint).
const (
	_ = uint(maxHistBuckets - fsyncBucketCount)
	_ = uint(maxHistBuckets - filesBucketCount)
)

func (h *bucketCounts) add(i int, v int64) {
	h.counts[i].Add(1)
	h.sum.Add(v)
}

// addTo adds the counts of the first len(per) buckets to per, and the sum to sum.
func (h *bucketCounts) addTo(per []uint64, sum *int64) {
	for i := range per {
		per[i] += h.counts[i].Load()
	}
	*sum += h.sum.Load()
}

// stageHist counts durations in StageBuckets.
type stageHist struct{ bucketCounts }

func (h *stageHist) observe(d time.Duration) {
	i := 0
	if d > stageBucketMin {
		// d in (min·2^(i-1), min·2^i] is bucket i.
		i = min(bits.Len64(uint64((d-1)/stageBucketMin)), stageBucketCount)
	}
	h.add(i, int64(d))
}

// FilesBuckets are the upper bounds of FlushStats.Files' buckets: 1 to 16,384 files
// synced in one round, doubling.
var FilesBuckets = func() []float64 {
	b := make([]float64, filesBucketCount)
	for i := range b {
		b[i] = float64(int(1) << i)
	}
	return b
}()

const filesBucketCount = 15

// countHist counts small integers in FilesBuckets.
type countHist struct{ bucketCounts }

func (h *countHist) observe(n int) {
	i := 0
	if n > 1 {
		i = min(bits.Len64(uint64(n-1)), filesBucketCount)
	}
	h.add(i, int64(n))
}

// Sync kinds of FlushStats.Syncs.
const (
	SyncKindSegment   = iota // a segment file's fdatasync
	SyncKindTxnIndex         // a segment's transaction index (entries written since the last sync)
	SyncKindIndex            // the offset and time indexes of a segment no longer active (once, after its roll)
	SyncKindEpochs           // the leader-epoch checkpoint (a new epoch began)
	SyncKindDir              // the log's directory (a segment was created)
	SyncKindFS               // a syncfs of the directory's file system, for a whole round (flusher_syncfs.go)
	SyncKindWriteback        // a segment file written back without a cache flush, durable by its round's one fdatasync (flusher_writeback.go)
	syncKinds
)

// SyncKindNames are the label values of the sync kinds, in order.
var SyncKindNames = [syncKinds]string{"segment", "txnindex", "index", "epochs", "dir", "fs", "writeback"}

// flushStats are one log directory's group-commit stage counters.
type flushStats struct {
	queue, wakeup, syncPhase, release stageHist
	files                             countHist
	syncs                             [syncKinds]atomic.Uint64
	serial, parallel, syncfs          atomic.Uint64 // rounds with at least one log, by how they synced
	writeback                         atomic.Uint64 // ... and rounds made durable by one cache flush
	syncfsFallbacks                   atomic.Uint64 // syncfs rounds synced again file by file after an error
}

// Histogram is a Prometheus histogram's content: Buckets[i] counts the
// observations at most the i-th bound (cumulative); Count includes those above the
// last bound.
type Histogram struct {
	Buckets []uint64
	Count   uint64
	Sum     float64 // seconds for durations, files for FlushStats.Files
}

// FlushStats is the group commit's stages since Open, over all log directories (the
// bounds of the duration histograms are StageBuckets, Files' FilesBuckets).
type FlushStats struct {
	// QueueWait: a durability waiter, from OnDurable/WaitDurable to the start of the
	// round that releases it (0 for one queued while that round ran).
	QueueWait Histogram
	// Wakeup: an idle flusher, from the first kick to its round's start.
	Wakeup Histogram
	// SyncPhase: a round, from its start to the end of its last sync.
	SyncPhase Histogram
	// Release: a round, from the end of its syncs to its last waiter completed
	// (completion callbacks included).
	Release Histogram
	// Files: the files a round synced (every kind), per round that synced any.
	Files Histogram
	// Syncs counts fdatasyncs and fsyncs by kind (SyncKindNames).
	Syncs [syncKinds]uint64
	// SerialRounds, ParallelRounds, SyncfsRounds and WritebackRounds count the
	// rounds with work, by whether their logs were synced one at a time on the
	// flusher's goroutine, flushParallel at a time, with one syncfs
	// (flusher_syncfs.go), or written back and made durable by one fdatasync
	// (flusher_writeback.go).
	SerialRounds, ParallelRounds, SyncfsRounds, WritebackRounds uint64
	// SyncfsFallbacks counts the syncfs rounds whose syncfs reported a
	// write-back error, after which their logs were synced file by file.
	SyncfsFallbacks uint64
}

// FlushStats merges the directories' group-commit stage counters.
func (m *Manager) FlushStats() FlushStats {
	var st FlushStats
	dur := func(get func(*flushStats) *stageHist) Histogram {
		var per [stageBucketCount + 1]uint64
		var sum int64
		for _, d := range m.dirs {
			get(&d.flushStats).addTo(per[:], &sum)
		}
		return cumulative(per[:], time.Duration(sum).Seconds())
	}
	st.QueueWait = dur(func(s *flushStats) *stageHist { return &s.queue })
	st.Wakeup = dur(func(s *flushStats) *stageHist { return &s.wakeup })
	st.SyncPhase = dur(func(s *flushStats) *stageHist { return &s.syncPhase })
	st.Release = dur(func(s *flushStats) *stageHist { return &s.release })
	var per [filesBucketCount + 1]uint64
	var files int64
	for _, d := range m.dirs {
		fs := &d.flushStats
		fs.files.addTo(per[:], &files)
		for k := range st.Syncs {
			st.Syncs[k] += fs.syncs[k].Load()
		}
		st.SerialRounds += fs.serial.Load()
		st.ParallelRounds += fs.parallel.Load()
		st.SyncfsRounds += fs.syncfs.Load()
		st.WritebackRounds += fs.writeback.Load()
		st.SyncfsFallbacks += fs.syncfsFallbacks.Load()
	}
	st.Files = cumulative(per[:], float64(files))
	return st
}

// cumulative turns per-bucket counts (the last one +Inf) into a Histogram.
func cumulative(per []uint64, sum float64) Histogram {
	h := Histogram{Buckets: make([]uint64, len(per)-1), Sum: sum}
	var c uint64
	for i := range h.Buckets {
		c += per[i]
		h.Buckets[i] = c
	}
	h.Count = c + per[len(per)-1]
	return h
}

// monoNow is a monotonic clock reading in nanoseconds since monoBase (0 is never a
// reading: it means "unset").
func monoNow() int64 { return int64(time.Since(monoBase)) + 1 }

var monoBase = time.Now()
