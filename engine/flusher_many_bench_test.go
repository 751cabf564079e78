package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkManyProducers: many-producers' load (bench/workloads) on the engine
// alone, without the network or the loader: producers goroutines, each with one
// request at a time of parts 1 KiB batches to distinct logs picked at random of
// logs (keyed records spread over every partition), appended under one FlushHold
// as replication.Produce does and answered once every part is durable (fsync
// policy, the flusher's own goroutines). An op is one request; req-p50-µs and
// req-p99-µs are its time from its first append to its last part durable,
// rounds/req the flusher rounds with work per request, rounds-waited the rounds
// that ended while a request waited (mean), fdatasyncs/req the segment syncs
// per request, cpu-µs/op the process's CPU per request, sync-µs/round and
// release-µs/round a round's sync and release phases, fdatasync-µs the mean
// fdatasync. late=false is the flusher as it was before its rounds took their
// waiters after their syncs and extended their write-backs (Options.earlyWaiters).
//
//	go test -run XXX -bench ManyProducers -benchtime 20000x -count 6 ./engine
func BenchmarkManyProducers(b *testing.B) {
	for _, late := range []bool{false, true} {
		b.Run(fmt.Sprintf("late=%v", late), func(b *testing.B) {
			benchManyProducers(b, Options{Sync: SyncFsync, earlyWaiters: !late})
		})
	}
}

func benchManyProducers(b *testing.B, o Options) {
	const logs, producers, parts = 100, 64, 5
	o.Dirs = []string{benchDir(b)}
	m, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ls := make([]*Log, logs)
	for i := range ls {
		if ls[i], err = m.CreateLog(TopicPartition{"bench", int32(i)}, DefaultLogConfig()); err != nil {
			b.Fatal(err)
		}
	}
	d := m.dirs[0]
	roundsDone := func() uint64 {
		fs := &d.flushStats
		return fs.serial.Load() + fs.parallel.Load() + fs.syncfs.Load() + fs.writeback.Load()
	}
	batch := makeBatch(testBatch{records: 1, valueSize: 1024})
	var next, waitedRounds atomic.Int64
	lat := make([][]time.Duration, producers)
	run := func(p int, n int64) {
		rng := rand.New(rand.NewPCG(uint64(p), 35))
		var h FlushHold
		var wg sync.WaitGroup
		pick := make([]int, 0, parts)
		for next.Add(1) <= n {
			pick = pick[:0]
			for len(pick) < parts {
				if i := rng.IntN(logs); !slices.Contains(pick, i) {
					pick = append(pick, i)
				}
			}
			t0 := time.Now()
			wg.Add(parts)
			for _, i := range pick {
				r, err := ls[i].Append(batch, AppendOptions{LeaderEpoch: 1, Hold: &h})
				if err != nil {
					b.Error(err)
					wg.Done()
					continue
				}
				ls[i].OnDurableHeld(r.LastOffset, &h, func(err error) {
					if err != nil {
						b.Error(err)
					}
					wg.Done()
				})
			}
			r0 := roundsDone()
			h.Release()
			wg.Wait()
			waitedRounds.Add(int64(roundsDone() - r0))
			lat[p] = append(lat[p], time.Since(t0))
		}
	}
	all := func(n int64) {
		next.Store(0)
		var wg sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func() { defer wg.Done(); run(p, n) }()
		}
		wg.Wait()
	}
	all(int64(logs * preallocAfter * 2)) // past the flushes that decide preallocation
	for p := range lat {
		lat[p] = lat[p][:0]
	}
	waitedRounds.Store(0)
	r0, f0 := roundsDone(), d.flushStats.syncs[SyncKindSegment].Load()
	sync0, syncs0 := d.flushStats.syncPhase.sum.Load(), d.flushStats.syncPhase.total()
	rel0, rels0 := d.flushStats.release.sum.Load(), d.flushStats.release.total()
	fs0, fsn0 := d.fsyncHist.sum.Load(), d.fsyncHist.total()
	before := cpuNanos(b)
	b.SetBytes(int64(parts * len(batch)))
	b.ResetTimer()
	all(int64(b.N))
	b.StopTimer()
	var all1 []time.Duration
	for _, l := range lat {
		all1 = append(all1, l...)
	}
	slices.Sort(all1)
	q := func(f float64) float64 { return float64(all1[int(f*float64(len(all1)-1))]) / 1e3 }
	b.ReportMetric(q(0.50), "req-p50-µs")
	b.ReportMetric(q(0.99), "req-p99-µs")
	b.ReportMetric(float64(roundsDone()-r0)/float64(b.N), "rounds/req")
	b.ReportMetric(float64(waitedRounds.Load())/float64(b.N), "rounds-waited")
	b.ReportMetric(float64(d.flushStats.syncs[SyncKindSegment].Load()-f0)/float64(b.N), "fdatasyncs/req")
	b.ReportMetric(float64(cpuNanos(b)-before)/1e3/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(d.flushStats.syncPhase.sum.Load()-sync0)/1e3/float64(d.flushStats.syncPhase.total()-syncs0), "sync-µs/round")
	b.ReportMetric(float64(d.fsyncHist.sum.Load()-fs0)/1e3/float64(d.fsyncHist.total()-fsn0), "fdatasync-µs")
	b.ReportMetric(float64(d.flushStats.release.sum.Load()-rel0)/1e3/float64(d.flushStats.release.total()-rels0), "release-µs/round")
}

// total is the number of observations.
func (h *bucketCounts) total() uint64 {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}
