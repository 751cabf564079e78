package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/internal/s3test"
	"github.com/samsa-broker/samsa/replication"
	"github.com/samsa-broker/samsa/replication/tiered"
)

// remoteReads reads data-0 from remote storage from offset 0 up to the local
// log start, 8 KiB a read; it returns what each read at an offset gave.
func remoteReads(t *testing.T, p *replication.Partition) map[int64][]byte {
	t.Helper()
	out := map[int64][]byte{}
	for off := int64(0); off < p.EngineLog().LogStartOffset(); {
		b, err := p.ReadRemote(context.Background(), off, 8<<10)
		if err != nil {
			t.Fatalf("remote read at %d: %v", off, err)
		}
		out[off] = b
		off = engine.BatchesEnd(b)
	}
	return out
}

func cacheFiles(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// A DiskChunkCache (fetch.chunk.cache.class): a file an earlier run left
// under its path is gone when it opens; the chunks read are files there; with
// the object store stopped, the same reads are served from them, the same
// bytes.
func TestDiskChunkCacheServesWithStoreDown(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "cache", "stale-chunk")
	if err := os.WriteFile(stale, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache, err := tiered.NewChunkCache(tiered.ChunkCacheConfig{Path: dir, Size: -1, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file left in the cache survived its opening: %v", err)
	}
	n := openNode(t, t.TempDir(), 0, sm, dataConfig(), func(c *tiered.Config) { c.ChunkCache, c.ChunkSize = cache, 4<<10 })
	defer n.close()
	n.produce(t, 0, 600)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := remoteReads(t, n.data)
	if len(first) < 4 {
		t.Fatalf("%d remote reads", len(first))
	}
	st := n.rlm.ChunkCacheStats()
	if files := cacheFiles(t, dir); files == 0 || int64(files) != st.Chunks || st.Misses == 0 || st.Bytes == 0 {
		t.Fatalf("%d files in the cache, stats %+v", files, st)
	}
	g.Kill()
	for off, want := range first {
		b, err := n.data.ReadRemote(context.Background(), off, 8<<10)
		if err != nil {
			t.Fatalf("read at %d with the store stopped: %v", off, err)
		}
		if !bytes.Equal(b, want) {
			t.Fatalf("read at %d with the store stopped: %d bytes differ from the %d read before", off, len(b), len(want))
		}
	}
	if st2 := n.rlm.ChunkCacheStats(); st2.Hits <= st.Hits || st2.Misses != st.Misses {
		t.Fatalf("stats before the store stopped %+v, after %+v: every read a hit", st, st2)
	}
}

// A bounded DiskChunkCache holds at most fetch.chunk.cache.size bytes,
// evicting the least recently read chunks (their files go); a chunk not read
// for fetch.chunk.cache.retention.ms goes too.
func TestChunkCacheSizeAndRetention(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	dir := t.TempDir()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	const chunk, size = 4 << 10, 3 * 4 << 10
	cache, err := tiered.NewChunkCache(tiered.ChunkCacheConfig{Path: dir, Size: size, Retention: time.Minute,
		Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	n := openNode(t, t.TempDir(), 0, sm, dataConfig(), func(c *tiered.Config) { c.ChunkCache, c.ChunkSize = cache, chunk })
	defer n.close()
	n.produce(t, 0, 600)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, readAll(t, n.data), 600)
	st := n.rlm.ChunkCacheStats()
	if st.Bytes > size || st.Evictions == 0 || cacheFiles(t, dir) != int(st.Chunks) {
		t.Fatalf("a cache of %d bytes: stats %+v, %d files", size, st, cacheFiles(t, dir))
	}
	now.Add(int64(2 * time.Minute))
	if _, err := n.data.ReadRemote(context.Background(), 0, 1024); err != nil {
		t.Fatal(err)
	}
	st2 := n.rlm.ChunkCacheStats()
	if st2.Evictions < st.Evictions+st.Chunks || cacheFiles(t, dir) != int(st2.Chunks) {
		t.Fatalf("after the retention: stats %+v (before %+v), %d files", st2, st, cacheFiles(t, dir))
	}
}
