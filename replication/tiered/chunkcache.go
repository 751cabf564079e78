package tiered

import (
	"container/list"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-broker/samsa/engine/remote"
)

// ChunkCache keeps chunks of copies' segments read from remote storage, as
// Aiven's plugin does (fetch.chunk.cache.*): in memory (MemoryChunkCache) or
// in files on local disk (DiskChunkCache), bounded by bytes with the least
// recently read chunk evicted first, and each chunk dropped once not read
// for the retention. A chunk in it is whole: the disk cache writes a chunk
// to Path/temp and renames it into Path/cache, so a file under cache is
// never partial. Both directories are emptied when the cache opens: a chunk
// is not trusted across a restart.
//
//	Path/cache/<segment id, hex>-<chunk number>   a chunk's bytes
//	Path/temp/                                    chunks being written
//
// Its methods may be called from any goroutine.
type ChunkCache struct {
	dir       string // "": in memory
	size      int64  // bound on the bytes held; < 0: none
	retention time.Duration
	now       func() time.Time

	mu struct {
		sync.Mutex
		entries map[chunkKey]*list.Element // of *cacheEntry
		lru     list.List                  // least recently read first
		bytes   int64
		seq     int64 // names temporary files
	}
	hits, misses, evictions atomic.Int64
}

type cacheEntry struct {
	key  chunkKey
	buf  *chunkBuf // in memory, a reference the cache holds; nil on disk
	size int64
	used time.Time // last read
}

// ChunkCacheConfig configures a ChunkCache (Aiven's fetch.chunk.cache.*).
type ChunkCacheConfig struct {
	// Path is DiskChunkCache's directory, which must exist; "" is
	// MemoryChunkCache.
	Path string
	// Size bounds the bytes held (fetch.chunk.cache.size); < 0: unbounded.
	Size int64
	// Retention drops a chunk not read for as long
	// (fetch.chunk.cache.retention.ms); 0: never.
	Retention time.Duration
	Now       func() time.Time
}

// NewChunkCache returns a chunk cache; with a Path, its cache and temp
// directories emptied.
func NewChunkCache(cfg ChunkCacheConfig) (*ChunkCache, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &ChunkCache{dir: cfg.Path, size: cfg.Size, retention: cfg.Retention, now: cfg.Now}
	c.mu.entries = map[chunkKey]*list.Element{}
	if c.dir == "" {
		return c, nil
	}
	if fi, err := os.Stat(c.dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("tiered: the chunk cache's directory %s: must exist (%v)", c.dir, err)
	}
	for _, sub := range []string{"cache", "temp"} {
		d := filepath.Join(c.dir, sub)
		if err := os.RemoveAll(d); err != nil {
			return nil, fmt.Errorf("tiered: emptying the chunk cache: %w", err)
		}
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, fmt.Errorf("tiered: the chunk cache: %w", err)
		}
	}
	return c, nil
}

// ChunkCacheStats are a chunk cache's counts since it opened.
type ChunkCacheStats struct {
	Hits, Misses, Evictions int64 // chunks found, not found, and dropped (by size or retention)
	Bytes, Chunks           int64 // held now
}

// Stats returns the cache's counts.
func (c *ChunkCache) Stats() ChunkCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ChunkCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(),
		Bytes: c.mu.bytes, Chunks: int64(c.mu.lru.Len())}
}

func (c *ChunkCache) file(k chunkKey) string {
	return filepath.Join(c.dir, "cache", hex.EncodeToString(k.id[:])+"-"+strconv.FormatInt(k.n, 10))
}

// get returns chunk k with a reference held for the caller, or false (a
// miss). A chunk on disk is read into a buffer of p.
func (c *ChunkCache) get(k chunkKey, p *chunkPool) (*chunkBuf, bool) {
	c.mu.Lock()
	c.expireLocked()
	el, ok := c.mu.entries[k]
	if !ok {
		c.mu.Unlock()
		c.misses.Add(1)
		return nil, false
	}
	e := el.Value.(*cacheEntry)
	e.used = c.now()
	c.mu.lru.MoveToBack(el)
	b := e.buf
	if b != nil {
		b.Retain() // before the lock is let go: an eviction then leaves the buffer to this reader
	}
	c.mu.Unlock()
	if c.dir != "" {
		if b = c.readFile(k, e.size, p); b == nil {
			// Evicted since, or the file is gone: read it from the store again.
			c.misses.Add(1)
			return nil, false
		}
	}
	c.hits.Add(1)
	return b, true
}

// readFile reads chunk k's file of size bytes into a buffer of p; nil if
// it is gone or of another size.
func (c *ChunkCache) readFile(k chunkKey, size int64, p *chunkPool) *chunkBuf {
	f, err := os.Open(c.file(k))
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() != size {
		return nil
	}
	b := p.get(int(size))
	if _, err := io.ReadFull(f, b.b); err != nil {
		b.Release()
		return nil
	}
	return b
}

// has reports whether chunk k is held, without reading it.
func (c *ChunkCache) has(k chunkKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.mu.entries[k]
	return ok
}

// put adds chunk k (a failure to write it leaves it out: a cache); in
// memory, the cache takes a reference of its own to b.
func (c *ChunkCache) put(k chunkKey, cb *chunkBuf) {
	b := cb.b
	if c.size >= 0 && int64(len(b)) > c.size {
		return
	}
	if c.dir != "" {
		c.mu.Lock()
		c.mu.seq++
		tmp := filepath.Join(c.dir, "temp", strconv.FormatInt(c.mu.seq, 10))
		c.mu.Unlock()
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			_ = os.Remove(tmp)
			return
		}
		if err := os.Rename(tmp, c.file(k)); err != nil {
			_ = os.Remove(tmp)
			return
		}
	}
	e := &cacheEntry{key: k, size: int64(len(b)), used: c.now()}
	if c.dir == "" {
		cb.Retain()
		e.buf = cb
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.mu.entries[k]; ok {
		c.removeLocked(el, false) // the same chunk written again: the file is the new one
	}
	c.mu.entries[k] = c.mu.lru.PushBack(e)
	c.mu.bytes += e.size
	for c.size >= 0 && c.mu.bytes > c.size && c.mu.lru.Len() > 1 {
		c.removeLocked(c.mu.lru.Front(), true)
		c.evictions.Add(1)
	}
	c.expireLocked()
}

// expireLocked drops the chunks not read for the retention: the least
// recently read are at the front.
func (c *ChunkCache) expireLocked() {
	if c.retention <= 0 {
		return
	}
	limit := c.now().Add(-c.retention)
	for el := c.mu.lru.Front(); el != nil && el.Value.(*cacheEntry).used.Before(limit); el = c.mu.lru.Front() {
		c.removeLocked(el, true)
		c.evictions.Add(1)
	}
}

// removeLocked drops an entry and, with file, its file; in memory, its
// reference to the chunk's buffer (reused once no read holds it either).
func (c *ChunkCache) removeLocked(el *list.Element, file bool) {
	e := el.Value.(*cacheEntry)
	c.mu.lru.Remove(el)
	delete(c.mu.entries, e.key)
	c.mu.bytes -= e.size
	if e.buf != nil {
		e.buf.Release()
		e.buf = nil
	}
	if file && c.dir != "" {
		_ = os.Remove(c.file(e.key)) // one left behind goes when the cache next opens
	}
}

// forget drops a deleted copy's chunks.
func (c *ChunkCache) forget(id remote.Uuid) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.mu.lru.Front(); el != nil; {
		next := el.Next()
		if el.Value.(*cacheEntry).key.id == id {
			c.removeLocked(el, true)
		}
		el = next
	}
}
