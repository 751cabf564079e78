package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// Benchmarks, each beside its baseline measured in the same run:
//
//	go test -run XXX -bench . -benchmem ./engine
//	SAMSA_BENCH_BIG=1 go test -run XXX -bench 'Recovery|CleanOpen' -benchtime 1x ./engine
//
// Data lives under $SAMSA_BENCH_DIR (default: the test's temp dir).

func benchDir(b *testing.B) string {
	if d := os.Getenv("SAMSA_BENCH_DIR"); d != "" {
		p, err := os.MkdirTemp(d, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(p) })
		return p
	}
	return b.TempDir()
}

const benchBatch = 16 << 10

// benchFileBytes bounds the disk used: the raw baseline wraps around in one
// file of this size, the engine uses segments of this size and deletes the
// old ones (a roll also fdatasyncs the old segment, which the raw baseline
// never does; at 16 KiB per op a 1 s run rarely rolls).
const benchFileBytes = 1 << 30

// BenchmarkRawWrite is the baseline of BenchmarkAppend: sequential pwrite of
// 16 KiB to one file, wrapping around at benchFileBytes.
func BenchmarkRawWrite(b *testing.B) {
	dir := benchDir(b)
	buf := make([]byte, benchBatch)
	b.SetBytes(benchBatch)
	b.ReportAllocs()
	f, err := os.OpenFile(filepath.Join(dir, "raw"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	var pos int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if pos+benchBatch > benchFileBytes {
			pos = 0
		}
		if _, err := f.WriteAt(buf, pos); err != nil {
			b.Fatal(err)
		}
		pos += benchBatch
	}
	b.StopTimer()
	f.Close()
}

// BenchmarkAppend appends batches under the none policy, into segments of
// benchFileBytes whose predecessors are deleted as it goes.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("batch=%dKiB", size>>10), func(b *testing.B) {
			m, err := Open(Options{Dirs: []string{benchDir(b)}, Sync: SyncNone})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			cfg := DefaultLogConfig()
			cfg.SegmentBytes = benchFileBytes
			cfg.FileDeleteDelayMs = 0
			l, _ := m.CreateLog(TopicPartition{"bench", 0}, cfg)
			batch := makeBatch(testBatch{records: 1, valueSize: size - BatchHeaderSize - 10})
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			segs := 1
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Append(batch, AppendOptions{LeaderEpoch: 1}); err != nil {
					b.Fatal(err)
				}
				if segmentCount(l) > segs { // rolled: drop the old segment
					leo := l.LogEndOffset()
					l.SetHighWatermark(leo)
					if _, err := l.DeleteRecordsBefore(leo); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkRawWriteFdatasync is the baseline of BenchmarkAppendFsync: one
// writer, write then fdatasync, for a 16 KiB and a 1 MiB write per sync.
func BenchmarkRawWriteFdatasync(b *testing.B) {
	for _, chunk := range []int{16 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("chunk=%dKiB", chunk>>10), func(b *testing.B) {
			f, err := os.OpenFile(filepath.Join(benchDir(b), "raw"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, chunk)
			b.SetBytes(int64(chunk))
			b.ReportAllocs()
			var pos int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if pos+int64(chunk) > benchFileBytes {
					pos = 0
				}
				if _, err := f.WriteAt(buf, pos); err != nil {
					b.Fatal(err)
				}
				if err := fdatasync(f); err != nil {
					b.Fatal(err)
				}
				pos += int64(chunk)
			}
		})
	}
}

// BenchmarkAppendFsync: N concurrent appenders of 16 KiB batches, each
// waiting for durability (fsync policy, group commit).
func BenchmarkAppendFsync(b *testing.B) {
	for _, appenders := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			m, err := Open(Options{Dirs: []string{benchDir(b)}, Sync: SyncFsync})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			cfg := DefaultLogConfig()
			cfg.SegmentBytes = benchFileBytes
			cfg.FileDeleteDelayMs = 0
			l, _ := m.CreateLog(TopicPartition{"bench", 0}, cfg)
			b.SetBytes(benchBatch)
			b.ReportAllocs()
			var next atomic.Int64
			var wg sync.WaitGroup
			var trimMu sync.Mutex
			before := m.FsyncLatency().Count
			b.ResetTimer()
			for g := 0; g < appenders; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					batch := makeBatch(testBatch{records: 1, valueSize: benchBatch - BatchHeaderSize - 10})
					for next.Add(1) <= int64(b.N) {
						r, err := l.Append(batch, AppendOptions{})
						if err == nil {
							err = l.WaitDurable(r.LastOffset)
						}
						if err != nil {
							b.Error(err)
							return
						}
						if l.Size() > 2*benchFileBytes && trimMu.TryLock() {
							l.SetHighWatermark(r.LastOffset)
							l.DeleteRecordsBefore(l.HighWatermark())
							trimMu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			st := m.FsyncLatency()
			if syncs := st.Count - before; syncs > 0 {
				b.ReportMetric(float64(b.N)/float64(syncs), "appends/fdatasync")
			}
			b.ReportMetric(float64(st.P99.Microseconds()), "fdatasync-p99-µs")
		})
	}
}

func buildIndexes(b *testing.B, entries int) (*offsetIndex, *timeIndex) {
	dir := b.TempDir()
	oi, _, err := openIndex(vfs.Default, filepath.Join(dir, "i.index"), offsetEntrySize, int32(entries*offsetEntrySize), true)
	if err != nil {
		b.Fatal(err)
	}
	ti, _, err := openIndex(vfs.Default, filepath.Join(dir, "i.timeindex"), timeEntrySize, int32(entries*timeEntrySize), true)
	if err != nil {
		b.Fatal(err)
	}
	o := &offsetIndex{mmapIndex: *oi, base: 1000}
	t := &timeIndex{mmapIndex: *ti, base: 1000}
	o.rebuildSumLocked()
	t.rebuildSumLocked()
	for i := 0; i < entries; i++ {
		o.appendEntryLocked(1000+int64(i)*10+9, int64(i)*4096)
		t.maybeAppendLocked(int64(i)*100+50, 1000+int64(i)*10+9)
	}
	b.Cleanup(func() { o.closeLocked(); t.closeLocked() })
	return o, t
}

// BenchmarkIndexLookup: random lookups in a full 10 MiB offset index
// (1.3 M entries) and time index (874 k entries).
func BenchmarkIndexLookup(b *testing.B) {
	const n = (10 << 20) / timeEntrySize
	o, ti := buildIndexes(b, n)
	rng := rand.New(rand.NewSource(1))
	targets := make([]int64, 1<<16)
	for i := range targets {
		targets[i] = int64(rng.Intn(n))
	}
	b.Run("offset", func(b *testing.B) {
		b.ReportAllocs()
		var sink int64
		for i := 0; i < b.N; i++ {
			_, pos, _ := o.lookup(1000 + targets[i&(len(targets)-1)]*10)
			sink += pos
		}
		_ = sink
	})
	b.Run("offset-nosummary", func(b *testing.B) {
		o.sumOK = false
		defer o.rebuildSumLocked()
		b.ReportAllocs()
		var sink int64
		for i := 0; i < b.N; i++ {
			_, pos, _ := o.lookup(1000 + targets[i&(len(targets)-1)]*10)
			sink += pos
		}
		_ = sink
	})
	b.Run("offset-warm", func(b *testing.B) {
		b.ReportAllocs()
		var sink int64
		for i := 0; i < b.N; i++ {
			_, pos, _ := o.lookup(1000 + int64(n-1-int(targets[i&(len(targets)-1)]%1000))*10)
			sink += pos
		}
		_ = sink
	})
	b.Run("time", func(b *testing.B) {
		b.ReportAllocs()
		var sink int64
		for i := 0; i < b.N; i++ {
			off, _ := ti.lookupBelow(targets[i&(len(targets)-1)] * 100)
			sink += off
		}
		_ = sink
	})
}

// BenchmarkRead: Read (find + pin + release) of 1 MiB at random offsets.
func BenchmarkRead(b *testing.B) {
	m, err := Open(Options{Dirs: []string{benchDir(b)}, Sync: SyncNone})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"bench", 0}, DefaultLogConfig())
	batch := makeBatch(testBatch{records: 10, valueSize: 100})
	for i := 0; i < 20000; i++ {
		if _, err := l.Append(batch, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	rng := rand.New(rand.NewSource(1))
	b.ReportAllocs()
	b.ResetTimer()
	var bytes int64
	for i := 0; i < b.N; i++ {
		s, err := l.Read(rng.Int63n(leo), 1<<20, leo, true)
		if err != nil {
			b.Fatal(err)
		}
		bytes += int64(s.Size)
		s.Release()
	}
	b.ReportMetric(float64(bytes)/float64(b.N), "bytes/read")
}

func TestAppendNoAllocs(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"alloc", 0}, DefaultLogConfig())
	plain := makeBatch(testBatch{records: 10, valueSize: 100})
	idem := makeBatch(testBatch{records: 10, valueSize: 100, pid: 1, epoch: 0, seq: 0})
	mustAppend(t, l, idem)
	seq := int32(10)
	if n := testing.AllocsPerRun(200, func() {
		if _, err := l.Append(plain, AppendOptions{LeaderEpoch: 1}); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("plain append: %v allocs", n)
	}
	if n := testing.AllocsPerRun(200, func() {
		binary.BigEndian.PutUint32(idem[offBaseSequence:], uint32(seq))
		binary.BigEndian.PutUint32(idem[offCRC:], crc32.Checksum(idem[offAttributes:], castagnoli))
		seq += 10
		if _, err := l.Append(idem, AppendOptions{LeaderEpoch: 1}); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("idempotent append: %v allocs", n)
	}
	if n := testing.AllocsPerRun(200, func() {
		s, err := l.Read(5, 1<<16, l.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		s.Release()
	}); n != 0 {
		t.Errorf("read: %v allocs", n)
	}
}

// bigBench skips unless SAMSA_BENCH_BIG is set.
func bigBench(b *testing.B) {
	if os.Getenv("SAMSA_BENCH_BIG") == "" {
		b.Skip("set SAMSA_BENCH_BIG=1 to write GiBs")
	}
}

func fillLog(b *testing.B, l *Log, bytes int64) {
	batch := makeBatch(testBatch{records: 16, valueSize: 1000})
	for l.Size() < bytes {
		if _, err := l.Append(batch, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecovery1GiB: open after a crash with a 1 GiB unflushed tail (no
// recovery-point checkpoint): every batch is read and CRC-checked, the
// indexes rebuilt. The data is in the page cache.
func BenchmarkRecovery1GiB(b *testing.B) {
	bigBench(b)
	dir := benchDir(b)
	tp := TopicPartition{"recover", 0}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		os.RemoveAll(dir)
		m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone})
		if err != nil {
			b.Fatal(err)
		}
		cfg := DefaultLogConfig()
		cfg.SegmentBytes = maxSegmentBytes // one segment: no roll, so no flush
		l, _ := m.CreateLog(tp, cfg)
		fillLog(b, l, 1<<30)
		size := l.Size()
		if segmentCount(l) != 1 || l.RecoveryPoint() != 0 {
			b.Fatalf("%d segments, recovery point %d: the tail is not all unflushed", segmentCount(l), l.RecoveryPoint())
		}
		m.abandon()
		os.Remove(filepath.Join(dir, recoveryPointFile)) // a checkpoint, if one was written, says 0 anyway
		b.StartTimer()
		t0 := time.Now()
		m, err = Open(Options{Dirs: []string{dir}, Sync: SyncNone})
		if err != nil {
			b.Fatal(err)
		}
		el := time.Since(t0)
		b.StopTimer()
		if m.Log(tp).Size() != size {
			b.Fatalf("recovered %d of %d bytes", m.Log(tp).Size(), size)
		}
		b.ReportMetric(el.Seconds(), "s/recovery")
		b.ReportMetric(float64(size)/1e6/el.Seconds(), "MB/s")
		m.Close()
	}
}

// BenchmarkCleanOpen10GiB: open a cleanly closed 10 GiB log (ten 1 GiB
// segments): indexes of old segments are opened lazily.
func BenchmarkCleanOpen10GiB(b *testing.B) {
	bigBench(b)
	dir := benchDir(b)
	tp := TopicPartition{"clean", 0}
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone})
	if err != nil {
		b.Fatal(err)
	}
	l, _ := m.CreateLog(tp, DefaultLogConfig())
	fillLog(b, l, 10<<30)
	leo := l.LogEndOffset()
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone})
		if err != nil {
			b.Fatal(err)
		}
		el := time.Since(t0)
		b.StopTimer()
		if m.Log(tp).LogEndOffset() != leo {
			b.Fatalf("LEO %d, want %d", m.Log(tp).LogEndOffset(), leo)
		}
		b.ReportMetric(el.Seconds(), "s/open")
		m.Close()
		b.StartTimer()
	}
}

// rawFile is a baseline writer in the same run as the engine.
type rawFile struct {
	f   *os.File
	pos int64
}

func newRawFile(b *testing.B, dir string) *rawFile {
	f, err := os.OpenFile(filepath.Join(dir, "raw-baseline"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return &rawFile{f: f}
}

func (r *rawFile) write(b *testing.B, p []byte, sync bool) {
	if r.pos+int64(len(p)) > benchFileBytes {
		r.pos = 0
	}
	if _, err := r.f.WriteAt(p, r.pos); err != nil {
		b.Fatal(err)
	}
	r.pos += int64(len(p))
	if sync {
		if err := fdatasync(r.f); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendVsRaw interleaves, in chunks of 256 operations, engine
// appends of 16 KiB batches (policy none) with raw pwrites of the same bytes
// to a plain file, so that both see the same machine load. It reports both
// bandwidths and their ratio (the goal is >= 0.8).
func BenchmarkAppendVsRaw(b *testing.B) {
	dir := benchDir(b)
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = benchFileBytes
	cfg.FileDeleteDelayMs = 0
	l, _ := m.CreateLog(TopicPartition{"bench", 0}, cfg)
	raw := newRawFile(b, dir)
	batch := makeBatch(testBatch{records: 1, valueSize: benchBatch - BatchHeaderSize - 10})
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	var tRaw, tEng time.Duration
	const chunk = 256
	b.ResetTimer()
	for done := 0; done < b.N; done += chunk {
		n := min(chunk, b.N-done)
		t0 := time.Now()
		for i := 0; i < n; i++ {
			raw.write(b, batch, false)
		}
		t1 := time.Now()
		for i := 0; i < n; i++ {
			if _, err := l.Append(batch, AppendOptions{LeaderEpoch: 1}); err != nil {
				b.Fatal(err)
			}
		}
		t2 := time.Now()
		tRaw += t1.Sub(t0)
		tEng += t2.Sub(t1)
		if segmentCount(l) > 1 {
			leo := l.LogEndOffset()
			l.SetHighWatermark(leo)
			l.DeleteRecordsBefore(leo)
		}
	}
	b.StopTimer()
	mb := float64(b.N) * float64(len(batch)) / 1e6
	b.ReportMetric(mb/tRaw.Seconds(), "raw-MB/s")
	b.ReportMetric(mb/tEng.Seconds(), "append-MB/s")
	b.ReportMetric(tRaw.Seconds()/tEng.Seconds(), "ratio")
}

// BenchmarkFsyncVsRaw interleaves phases of N concurrent appenders (16 KiB
// batches, policy fsync, each waiting for durability) with phases of a
// single raw writer doing write+fdatasync of 16 KiB and of 1 MiB. It reports
// the three bandwidths and the engine's ratio to each.
func BenchmarkFsyncVsRaw(b *testing.B) {
	for _, appenders := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			dir := benchDir(b)
			m, err := Open(Options{Dirs: []string{dir}, Sync: SyncFsync})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			cfg := DefaultLogConfig()
			cfg.SegmentBytes = benchFileBytes
			l, _ := m.CreateLog(TopicPartition{"bench", 0}, cfg)
			raw := newRawFile(b, dir)
			small := make([]byte, benchBatch)
			bigChunk := make([]byte, 1<<20)
			batches := make([][]byte, appenders)
			for i := range batches {
				batches[i] = makeBatch(testBatch{records: 1, valueSize: benchBatch - BatchHeaderSize - 10})
			}
			b.SetBytes(int64(len(batches[0])))
			b.ReportAllocs()
			var tEng, tRawSmall, tRawBig time.Duration
			var bytesEng, bytesSmall, bytesBig int64
			phase := max(appenders*4, 64)
			b.ResetTimer()
			for done := 0; done < b.N; done += phase {
				n := min(phase, b.N-done)
				// Engine phase.
				var next atomic.Int64
				var wg sync.WaitGroup
				t0 := time.Now()
				for g := 0; g < appenders; g++ {
					wg.Add(1)
					go func(batch []byte) {
						defer wg.Done()
						for next.Add(1) <= int64(n) {
							r, err := l.Append(batch, AppendOptions{})
							if err == nil {
								err = l.WaitDurable(r.LastOffset)
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
					}(batches[g])
				}
				wg.Wait()
				tEng += time.Since(t0)
				bytesEng += int64(n) * int64(len(batches[0]))
				// Raw phases: a bounded number of syncs each.
				t0 = time.Now()
				for i := 0; i < 16; i++ {
					raw.write(b, small, true)
				}
				tRawSmall += time.Since(t0)
				bytesSmall += 16 * int64(len(small))
				t0 = time.Now()
				for i := 0; i < 4; i++ {
					raw.write(b, bigChunk, true)
				}
				tRawBig += time.Since(t0)
				bytesBig += 4 << 20
				if l.Size() > benchFileBytes/2 {
					leo := l.LogEndOffset()
					l.SetHighWatermark(leo)
					l.TruncateFullyAndStartAt(leo)
				}
			}
			b.StopTimer()
			eng := float64(bytesEng) / 1e6 / tEng.Seconds()
			rs := float64(bytesSmall) / 1e6 / tRawSmall.Seconds()
			rb := float64(bytesBig) / 1e6 / tRawBig.Seconds()
			b.ReportMetric(eng, "append-MB/s")
			b.ReportMetric(rs, "raw16K-MB/s")
			b.ReportMetric(rb, "raw1M-MB/s")
			b.ReportMetric(eng/rs, "ratio16K")
			b.ReportMetric(eng/rb, "ratio1M")
		})
	}
}
