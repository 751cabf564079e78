package purgatory

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// benchOp never completes by condition; it counts expirations.
type benchOp struct {
	Delayed
	fired *atomic.Int64
	done  chan struct{}
	limit int64
}

func (o *benchOp) TryComplete() bool { return false }
func (o *benchOp) OnComplete()       {}
func (o *benchOp) OnExpiration() {
	if o.fired != nil && o.fired.Add(1) == o.limit {
		close(o.done)
	}
}

var pendingSizes = []int{10_000, 100_000}

// timeouts spread pending work over many buckets and levels.
func spreadTimeouts(n int, lo, hi time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	x := uint64(88172645463325252)
	for i := range out {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		out[i] = lo + time.Duration(x%uint64(hi-lo))
	}
	return out
}

// BenchmarkInsertCancel arms one timeout and cancels it, with `pending` other timeouts
// armed, for the timing wheel (through the Purgatory) and for time.AfterFunc/Stop.
func BenchmarkInsertCancel(b *testing.B) {
	to := spreadTimeouts(4096, time.Millisecond, 30*time.Second)
	for _, n := range pendingSizes {
		b.Run(fmt.Sprintf("wheel/pending=%d", n), func(b *testing.B) {
			p := New[int]("bench", Options{})
			defer p.Close()
			long := spreadTimeouts(n, time.Hour, 2*time.Hour)
			for i := range long {
				o := &benchOp{}
				o.Init(o, long[i])
				p.TryCompleteElseWatch(o)
			}
			ring := make([]benchOp, 1024)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuNanos()
			for i := 0; i < b.N; i++ {
				o := &ring[i%len(ring)]
				o.Init(o, to[i%len(to)])
				p.TryCompleteElseWatch(o)
				o.ForceComplete()
			}
			b.ReportMetric(float64(cpuNanos()-cpu0)/float64(b.N), "cpu-ns/op")
		})
		b.Run(fmt.Sprintf("afterfunc/pending=%d", n), func(b *testing.B) {
			f := func() {}
			long := spreadTimeouts(n, time.Hour, 2*time.Hour)
			timers := make([]*time.Timer, n)
			for i := range timers {
				timers[i] = time.AfterFunc(long[i], f)
			}
			defer func() {
				for _, t := range timers {
					t.Stop()
				}
			}()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuNanos()
			for i := 0; i < b.N; i++ {
				t := time.AfterFunc(to[i%len(to)], f)
				t.Stop()
			}
			b.ReportMetric(float64(cpuNanos()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkInsertExpire arms timeouts of 1-20 ms in rounds of `pending` and waits for
// each round to fire; ns/op is wall time (it includes the wait), cpu-ns/op is the
// process CPU time per operation (insert, expiry and callback), the figure to compare
// (on a shared machine wall time also counts the time other processes held the CPU).
func BenchmarkInsertExpire(b *testing.B) {
	for _, n := range pendingSizes {
		to := spreadTimeouts(n, time.Millisecond, 20*time.Millisecond)
		b.Run(fmt.Sprintf("wheel/pending=%d", n), func(b *testing.B) {
			p := New[int]("bench", Options{})
			defer p.Close()
			ops := make([]benchOp, n)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuNanos()
			for left := b.N; left > 0; {
				k := min(left, n)
				left -= k
				var fired atomic.Int64
				done := make(chan struct{})
				for i := 0; i < k; i++ {
					o := &ops[i]
					*o = benchOp{fired: &fired, done: done, limit: int64(k)}
					o.Init(o, to[i])
					p.TryCompleteElseWatch(o)
				}
				<-done
			}
			b.ReportMetric(float64(cpuNanos()-cpu0)/float64(b.N), "cpu-ns/op")
		})
		b.Run(fmt.Sprintf("afterfunc/pending=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuNanos()
			for left := b.N; left > 0; {
				k := min(left, n)
				left -= k
				var fired atomic.Int64
				done := make(chan struct{})
				f := func() {
					if fired.Add(1) == int64(k) {
						close(done)
					}
				}
				for i := 0; i < k; i++ {
					time.AfterFunc(to[i], f)
				}
				<-done
			}
			b.ReportMetric(float64(cpuNanos()-cpu0)/float64(b.N), "cpu-ns/op")
		})
		b.Run(fmt.Sprintf("wheel-manualclock/pending=%d", n), func(b *testing.B) {
			// The wheel alone: no reaper, no sleeping; the clock jumps 20 ms per round.
			var now atomic.Int64
			p := New[int]("bench", Options{Clock: now.Load})
			defer p.Close()
			ops := make([]benchOp, n)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuNanos()
			for left := b.N; left > 0; {
				k := min(left, n)
				left -= k
				for i := 0; i < k; i++ {
					o := &ops[i]
					o.Init(o, to[i])
					p.TryCompleteElseWatch(o)
				}
				// Step through the round millisecond by millisecond, as the reaper would.
				base := now.Load()
				for ms := int64(1); ms <= 20; ms++ {
					now.Store(base + ms)
					p.AdvanceClock(base + ms)
				}
			}
			b.ReportMetric(float64(cpuNanos()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkWatchComplete is the long-poll fetch path: watch an op under a partition key,
// then a produce to that partition completes it, with `pending` other ops waiting.
func BenchmarkWatchComplete(b *testing.B) {
	type tp struct {
		topic string
		part  int32
	}
	for _, n := range pendingSizes {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			p := New[tp]("fetch", Options{})
			defer p.Close()
			for i := 0; i < n; i++ {
				o := &testOp{}
				o.Init(o, time.Hour)
				p.TryCompleteElseWatch(o, tp{"idle", int32(i % 1000)})
			}
			ring := make([]testOp, 1024)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				o := &ring[i%len(ring)]
				*o = testOp{}
				o.Init(o, 500*time.Millisecond)
				k := tp{"busy", int32(i % 100)}
				p.TryCompleteElseWatch(o, k)
				o.ready.Store(true)
				if p.CheckAndComplete(k) != 1 {
					b.Fatal("op not completed")
				}
			}
		})
	}
}
