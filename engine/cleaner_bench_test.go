package engine

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// Cleaner throughput, per codec, beside the raw limit measured in the
// same run:
//
//	go test -run XXX -bench 'Cleaner' -benchmem ./engine
//
// Each op cleans a fresh copy of the same log: benchCleanBytes of batches
// of 16 records (a 100-byte value each) over 20,000 keys, in 1 MiB
// segments, so that a pass reads everything and keeps about the last
// record of each key; MB/s counts the bytes of the log before the pass.
// BenchmarkCleanerRawReadWrite is what a pass that copied everything would
// cost in I/O alone: read the segments, write them to one file,
// fdatasync.

const benchCleanBytes = 16 << 20

// benchCleanLog builds (once per codec) the log to clean and returns its
// directory.
func benchCleanLog(b *testing.B, codec int) string {
	dir := benchDir(b)
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone, manualBackground: true})
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultLogConfig()
	cfg.Compact, cfg.Delete = true, false
	cfg.SegmentBytes = 1 << 20
	cfg.SegmentIndexBytes = 1 << 20
	l, err := m.CreateLog(TopicPartition{"bench", 0}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	val := make([]byte, 100)
	for l.Size() < benchCleanBytes {
		recs := make([]kv, 16)
		for i := range recs {
			rng.Read(val[:50]) // half random, half compressible
			recs[i] = kv{key: fmt.Sprintf("key-%05d", rng.Intn(20000)), value: append([]byte(nil), val...), ts: 1000}
		}
		if _, err := l.Append(keyedBatch(b, recs, batchOpts{codec: codec, baseTs: 1000}), AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	// One more segment, so that every batch above is in a cleanable one.
	for s := segmentCount(l); segmentCount(l) == s; {
		l.Append(keyedBatch(b, []kv{{key: "tail", value: val}}, batchOpts{codec: codec, baseTs: 1000}), AppendOptions{})
	}
	l.SetHighWatermark(l.LogEndOffset())
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

func copyTree(b *testing.B, src, dst string) {
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if fi.Name() == ".lock" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkCleaner(b *testing.B) {
	for codec := codecNone; codec <= codecZstd; codec++ {
		b.Run("codec="+codecName(codec), func(b *testing.B) {
			src := benchCleanLog(b, codec)
			work := benchDir(b)
			var read, written int64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(work, fmt.Sprint(i))
				copyTree(b, src, dir)
				m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone, manualBackground: true,
					Cleaner: CleanerOptions{DedupeBufferSize: 16 << 20}})
				if err != nil {
					b.Fatal(err)
				}
				l := m.Log(TopicPartition{"bench", 0})
				cfg := l.Config()
				cfg.Compact, cfg.Delete = true, false
				l.SetConfig(cfg)
				l.SetHighWatermark(l.LogEndOffset())
				size := l.Size()
				b.SetBytes(size)
				b.StartTimer()
				if n, err := m.Compact(context.Background()); err != nil || n != 1 {
					b.Fatalf("Compact: %d %v", n, err)
				}
				b.StopTimer()
				st := m.CleanerStats()
				read, written = size, st.BytesWritten
				m.Close()
				os.RemoveAll(dir)
				b.StartTimer()
			}
			b.ReportMetric(float64(written)/float64(read), "written/read")
		})
	}
}

func BenchmarkCleanerRawReadWrite(b *testing.B) {
	src := benchCleanLog(b, codecNone)
	segs, _ := filepath.Glob(filepath.Join(src, "bench-0", "*.log"))
	var size int64
	for _, s := range segs {
		fi, _ := os.Stat(s)
		size += fi.Size()
	}
	out := filepath.Join(benchDir(b), "out")
	buf := make([]byte, 512<<10)
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range segs {
			r, err := os.Open(s)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{r}, buf); err != nil {
				b.Fatal(err)
			}
			r.Close()
		}
		if err := fdatasync(w); err != nil {
			b.Fatal(err)
		}
		w.Close()
	}
}
