//go:build linux

package engine

import (
	"errors"
	"fmt"
	"testing"
)

// BenchmarkWritebackRound: a group-commit round of logs logs, each with one
// 12.5 KiB append waiting (omb-1topic-100p-1kb's Produce request: a batch of
// about 12 records of 1 KiB), made durable with an fdatasync per log
// (writeback=off: Options.NoFlushWriteback) or written back and ended by one
// fdatasync (writeback=on, flusher_writeback.go). An op is one round, run on the
// benchmark's goroutine (manual rounds); cpu-µs/op is the process's user+system
// time per round (getrusage: the disk's interrupts on other CPUs are not in it).
//
//	go test -run XXX -bench WritebackRound -benchtime 2000x -count 6 ./engine
func BenchmarkWritebackRound(b *testing.B) {
	for _, logs := range []int{2, 4, 16} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("logs=%d/writeback=%v", logs, on), func(b *testing.B) {
				m, err := Open(Options{Dirs: []string{benchDir(b)}, Sync: SyncFsync, manualBackground: true, NoFlushWriteback: !on})
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				if on && !m.dirs[0].writeback {
					b.Skip("no rounds by one cache flush on this file system")
				}
				ls := make([]*Log, logs)
				for i := range ls {
					if ls[i], err = m.CreateLog(TopicPartition{"bench", int32(i)}, DefaultLogConfig()); err != nil {
						b.Fatal(err)
					}
				}
				batch := makeBatch(testBatch{records: 1, valueSize: 12800 - BatchHeaderSize - 10})
				errs := make([]error, logs)
				notReleased := errors.New("not released")
				round := func() {
					for i, l := range ls {
						r, err := l.Append(batch, AppendOptions{LeaderEpoch: 1})
						if err != nil {
							b.Fatal(err)
						}
						errs[i] = notReleased
						l.OnDurable(r.LastOffset, func(err error) { errs[i] = err })
					}
					m.flushRound()
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				for range 2 * preallocAfter { // past the flushes that decide, and the zeros' first sync
					round()
				}
				b.SetBytes(int64(logs * len(batch)))
				before := cpuNanos(b)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					round()
				}
				b.StopTimer()
				b.ReportMetric(float64(cpuNanos(b)-before)/1e3/float64(b.N), "cpu-µs/op")
				st := m.FlushStats()
				if on && st.WritebackRounds == 0 {
					b.Fatal("no round was made durable by one cache flush")
				}
			})
		}
	}
}
