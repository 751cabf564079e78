//go:build linux

package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkSmallWriteFdatasync measures what one small durable append costs
// the process, by how the file's blocks came to be, to decide whether the
// engine should prepare segment files ahead of its appends (prealloc.go):
//
//	grow:      the file grows with each write (a log that does not preallocate);
//	fallocate: the blocks are allocated ahead (fallocate mode 0, size set),
//	           so they are unwritten extents the sync must convert;
//	keepsize:  the same with FALLOC_FL_KEEP_SIZE (size still grows);
//	written:   the blocks were written with zeros and synced ahead, so a
//	           data sync carries no allocation and no extent change.
//
// Each op is a pwrite of 200 bytes (or 3,300: a Produce request of
// latency-20k, which reaches a new block at nearly every op) at the end of the
// previous one, then fdatasync. cpu-µs/op is the process's user+system time per op (getrusage):
// the kernel's journal thread is not in it, as it is not in a broker's.
//
//	go test -run XXX -bench SmallWriteFdatasync -benchtime 2000x -count 4 ./engine
func BenchmarkSmallWriteFdatasync(b *testing.B) {
	for _, write := range []int64{200, 3300} {
		for _, layout := range []string{"grow", "fallocate", "keepsize", "written"} {
			b.Run(fmt.Sprintf("size=%d/layout=%s", write, layout), func(b *testing.B) {
				smallWriteFdatasync(b, layout, write)
			})
		}
	}
}

func smallWriteFdatasync(b *testing.B, layout string, write int64) {
	f, err := os.OpenFile(filepath.Join(benchDir(b), "seg"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	size := int64(b.N)*write + 4096
	fd := int(f.Fd())
	switch layout {
	case "fallocate":
		err = unix.Fallocate(fd, 0, 0, size)
	case "keepsize":
		err = unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, size)
	case "written":
		zero := make([]byte, 1<<20)
		for off := int64(0); off < size && err == nil; off += int64(len(zero)) {
			_, err = f.WriteAt(zero, off)
		}
		if err == nil {
			err = unix.Fsync(fd)
		}
	}
	if err != nil {
		b.Skipf("%s: %v", layout, err)
	}
	buf := make([]byte, write)
	b.SetBytes(write)
	b.ReportAllocs()
	before := cpuNanos(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.WriteAt(buf, int64(i)*write); err != nil {
			b.Fatal(err)
		}
		if err := fdatasync(f); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuNanos(b)-before)/1e3/float64(b.N), "cpu-µs/op")
}

func cpuNanos(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkSmallAppendFsync is the engine's side of the same question: one
// producer appending batches of 200 bytes, and of 3,300 bytes (a Produce
// request of latency-20k: 33 records of 100 bytes), under the fsync policy and
// waiting for each to be durable, with and without preallocation (prealloc.go).
//
//	go test -run XXX -bench SmallAppendFsync -benchtime 3000x -count 4 ./engine
func BenchmarkSmallAppendFsync(b *testing.B) {
	for _, size := range []int{200, 3300} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("size=%d/prealloc=%t", size, on), func(b *testing.B) {
				m, err := Open(Options{Dirs: []string{benchDir(b)}, Sync: SyncFsync, NoPrealloc: !on})
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				l, err := m.CreateLog(TopicPartition{"bench", 0}, DefaultLogConfig())
				if err != nil {
					b.Fatal(err)
				}
				batch := makeBatch(testBatch{records: 1, valueSize: size - BatchHeaderSize - 10})
				app := func() {
					r, err := l.Append(batch, AppendOptions{LeaderEpoch: 1})
					if err == nil {
						err = l.WaitDurable(r.LastOffset)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				for range preallocAfter { // past the flushes that decide
					app()
				}
				b.SetBytes(int64(len(batch)))
				b.ReportAllocs()
				before := cpuNanos(b)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					app()
				}
				b.StopTimer()
				b.ReportMetric(float64(cpuNanos(b)-before)/1e3/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// BenchmarkDurableAppendPattern compares the fdatasync of BenchmarkSmallAppendFsync
// (one log, each append waited for, back to back) with the broker's pattern at
// latency-20k: 3,300-byte appends each waited for, spread over six logs in turn
// (the sticky partitioner's one partition per request), and paced at 600 appends
// a second (pace=1.7ms) so that the disk idles between syncs as it does there.
// fsync-µs is the engine's own fdatasync latency (FsyncHistogram's mean), the
// figure /metrics gives as samsa_engine_fsync_latency_seconds; wait-µs the mean
// time from the append to its durability.
func BenchmarkDurableAppendPattern(b *testing.B) {
	for _, logs := range []int{1, 6} {
		for _, pace := range []time.Duration{0, 1700 * time.Microsecond} {
			b.Run(fmt.Sprintf("logs=%d/pace=%v", logs, pace), func(b *testing.B) {
				m, err := Open(Options{Dirs: []string{benchDir(b)}, Sync: SyncFsync})
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
				batch := makeBatch(testBatch{records: 1, valueSize: 3300 - BatchHeaderSize - 10})
				var waited time.Duration
				app := func(i int) {
					t0 := time.Now()
					l := ls[i%logs]
					r, err := l.Append(batch, AppendOptions{LeaderEpoch: 1})
					if err == nil {
						err = l.WaitDurable(r.LastOffset)
					}
					if err != nil {
						b.Fatal(err)
					}
					waited += time.Since(t0)
				}
				for i := range preallocAfter * logs { // past the flushes that decide
					app(i)
				}
				f0 := m.FsyncHistogram()
				waited = 0
				b.ResetTimer()
				next := time.Now()
				for i := 0; i < b.N; i++ {
					if pace > 0 {
						next = next.Add(pace)
						if d := time.Until(next); d > 0 {
							time.Sleep(d) // pacing: the next append's scheduled arrival, not a wait for a condition
						}
					}
					app(i)
				}
				b.StopTimer()
				f1 := m.FsyncHistogram()
				if n := f1.Count - f0.Count; n > 0 {
					b.ReportMetric(float64((f1.Sum-f0.Sum).Microseconds())/float64(n), "fsync-µs")
				}
				b.ReportMetric(float64(waited.Microseconds())/float64(b.N), "wait-µs")
			})
		}
	}
}

// BenchmarkManyFilesSync asks whether a round of many dirty logs (partitions-10k:
// one-record batches over thousands of partitions) is cheaper as one syncfs(2) of
// the file system than as one fdatasync per file, flushParallel at a time, as the
// flusher does it. Each op writes 1 KiB at the end of each of files files (grown,
// as a log that does not preallocate), then syncs them. syncfs writes back and
// commits every dirty inode of the whole file system, other processes' included,
// so on a shared disk it also pays for their writes.
func BenchmarkManyFilesSync(b *testing.B) {
	for _, files := range []int{64, 512} {
		for _, mode := range []string{"fdatasync", "syncfs"} {
			b.Run(fmt.Sprintf("files=%d/%s", files, mode), func(b *testing.B) {
				dir := benchDir(b)
				fs := make([]*os.File, files)
				for i := range fs {
					f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%05d.log", i)), os.O_CREATE|os.O_RDWR, 0o644)
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					fs[i] = f
				}
				buf := make([]byte, 1024)
				var off int64
				syncAll := func() {
					if mode == "syncfs" {
						if err := unix.Syncfs(int(fs[0].Fd())); err != nil {
							b.Fatal(err)
						}
						return
					}
					var next atomic.Int64
					var wg sync.WaitGroup
					for range flushParallel {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := next.Add(1) - 1; i < int64(len(fs)); i = next.Add(1) - 1 {
								if err := unix.Fdatasync(int(fs[i].Fd())); err != nil {
									b.Error(err)
								}
							}
						}()
					}
					wg.Wait()
				}
				b.ReportAllocs()
				before := cpuNanos(b)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for _, f := range fs {
						if _, err := f.WriteAt(buf, off); err != nil {
							b.Fatal(err)
						}
					}
					off += int64(len(buf))
					syncAll()
				}
				b.StopTimer()
				b.ReportMetric(float64(cpuNanos(b)-before)/1e3/float64(b.N), "cpu-µs/op")
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(files), "µs/file")
			})
		}
	}
}

// BenchmarkConcurrentRounds: six producers, each appending 3,300-byte batches to
// its own log and waiting for each, under the fsync policy, with one group-commit
// round of the directory at a time (rounds=1, the default) or more
// (Options.FlushConcurrentRounds). An op is one durable append of one producer;
// wait-µs is the mean time from an append to its durability.
func BenchmarkConcurrentRounds(b *testing.B) {
	for _, rounds := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("rounds=%d", rounds), func(b *testing.B) {
			m, err := Open(Options{Dirs: []string{benchDir(b)}, Sync: SyncFsync, FlushConcurrentRounds: rounds})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			const producers = 6
			ls := make([]*Log, producers)
			for i := range ls {
				if ls[i], err = m.CreateLog(TopicPartition{"bench", int32(i)}, DefaultLogConfig()); err != nil {
					b.Fatal(err)
				}
			}
			var next, waited atomic.Int64
			run := func(l *Log, n int64) {
				batch := makeBatch(testBatch{records: 1, valueSize: 3300 - BatchHeaderSize - 10})
				for next.Add(1) <= n {
					t0 := time.Now()
					r, err := l.Append(batch, AppendOptions{LeaderEpoch: 1})
					if err == nil {
						err = l.WaitDurable(r.LastOffset)
					}
					if err != nil {
						b.Error(err)
						return
					}
					waited.Add(int64(time.Since(t0)))
				}
			}
			all := func(n int64) {
				next.Store(0)
				var wg sync.WaitGroup
				for _, l := range ls {
					wg.Add(1)
					go func() { defer wg.Done(); run(l, n) }()
				}
				wg.Wait()
			}
			all(preallocAfter * producers * 2) // past the flushes that decide
			f0 := m.FsyncHistogram()
			waited.Store(0)
			before := cpuNanos(b)
			b.ResetTimer()
			all(int64(b.N))
			b.StopTimer()
			f1 := m.FsyncHistogram()
			b.ReportMetric(float64(cpuNanos(b)-before)/1e3/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(waited.Load())/1e3/float64(b.N), "wait-µs")
			b.ReportMetric(float64(f1.Count-f0.Count)/float64(b.N), "fsyncs/op")
		})
	}
}
