package tiered_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"syscall"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/internal/s3test"
	"github.com/samsa-broker/samsa/replication"
	"github.com/samsa-broker/samsa/replication/tiered"
)

// BenchmarkRemoteFetch is a consumer catching up from remote storage, as the
// broker's Fetch reads a partition below its local log start (FetchRemote):
// 8 MiB a read from offset 0 to the local log start, over and over, each
// read released once done with (as a Fetch answer once written). 24 MiB of
// 1 KiB records in 8 MiB segments, copied to versitygw. cache: the copies'
// chunks (4 MiB) in the chunk cache after the first pass; store: a chunk
// cache of one chunk and no read-ahead, so that each read reads two or three
// chunks from versitygw (GET, the body read into the chunk's buffer).
// cpu-ns/op is this process's CPU time a read (versitygw's left out).
func BenchmarkRemoteFetch(b *testing.B) {
	b.Run("cache", func(b *testing.B) { benchRemoteFetch(b) })
	b.Run("store", func(b *testing.B) {
		cache, err := tiered.NewChunkCache(tiered.ChunkCacheConfig{Size: 4 << 20})
		if err != nil {
			b.Fatal(err)
		}
		benchRemoteFetch(b, func(c *tiered.Config) { c.ChunkCache, c.ChunkSize = cache, 4<<20 })
	})
}

func benchRemoteFetch(b *testing.B, opts ...func(*tiered.Config)) {
	g := s3test.Start(b)
	sm := storage(b, g)
	cfg := dataConfig()
	cfg.SegmentBytes = 8 << 20
	cfg.IndexIntervalBytes = 4 << 10
	n := openNode(b, b.TempDir(), 0, sm, cfg, opts...)
	defer n.close()
	for i := 0; i < 24<<10; i += 100 {
		var recs []engine.Record
		for j := i; j < i+100; j++ {
			recs = append(recs, engine.Record{Timestamp: time.Now().UnixMilli(), Value: bytes.Repeat([]byte{byte(j)}, 1000)})
		}
		batch, err := engine.AppendRecords(nil, recs)
		if err != nil {
			b.Fatal(err)
		}
		pr := new(replication.Produce)
		done := make(chan struct{})
		pr.Begin(n.repl, -1, 5*time.Second, func() { close(done) })
		if _, err := pr.Append(n.data, batch); err != nil {
			b.Fatal(err)
		}
		pr.Seal()
		<-done
		if err := pr.Part(0).Err; err != nil {
			b.Fatal(err)
		}
	}
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		b.Fatal(err)
	}
	end := n.data.LocalLogStartOffset()
	if end < 16<<10 {
		b.Fatalf("local log start %d: the copies were not made", end)
	}
	fetch := func(off int64) int64 {
		r, err := n.data.FetchRemote(off, 8<<20, false)
		if err != nil || r.Throttled || recordsLen(r) == 0 {
			b.Fatalf("fetch at %d: %d bytes, throttled %v, %v", off, recordsLen(r), r.Throttled, err)
		}
		b.SetBytes(int64(recordsLen(r)))
		end := recordsEnd(r)
		r.Records.Release()
		return end
	}
	for off := int64(0); off < end; {
		off = fetch(off) // the chunks into the cache
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := selfCPU()
	off := int64(0)
	for range b.N {
		if off = fetch(off); off >= end {
			off = 0
		}
	}
	b.ReportMetric(float64(selfCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// selfCPU is this process's user plus system time: a read's CPU, the
// object store's (a process of its own) left out.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func recordsLen(r replication.RemoteFetch) int { return r.Records.Len() }

// recordsEnd is one past the last offset of r's batches, read from their
// headers where they lie (engine.BatchesEnd without joining the slices).
func recordsEnd(r replication.RemoteFetch) int64 {
	var h [engine.BatchHeaderSize]byte
	end := int64(-1)
	for at, n := 0, r.Records.Len(); at+len(h) <= n; {
		r.Records.CopyAt(h[:], at)
		end = int64(binary.BigEndian.Uint64(h[0:8])) + int64(binary.BigEndian.Uint32(h[23:27])) + 1
		at += int(binary.BigEndian.Uint32(h[8:12])) + 12
	}
	return end
}
