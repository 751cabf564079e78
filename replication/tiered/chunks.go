package tiered

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/engine/remote"
)

// Segment bytes are read from remote storage in aligned chunks of
// Config.ChunkSize bytes (rsm.config.chunk.size with a chunk cache
// configured; defaultChunk otherwise), kept in the ChunkCache: a consumer
// reading a copy in order gets one GET per chunk, not one per fetch. The
// chunks after one read are read ahead into the cache while the consumer
// works through it (Config.PrefetchBytes). Without a cache configured
// (fetch.chunk.cache.class), the built-in one keeps the last
// defaultCacheChunks chunks in memory, 128 MiB, and reads defaultReadAhead
// chunks ahead. It holds the chunk each partition's last read ended in and
// those read ahead for several partitions read at once: a consumer's fetch
// reads its partitions one after the other, and with 8 entries six
// partitions evicted each other's chunks before their next fetch, so most
// chunks were read twice (tiered-catchup: BENCHMARKS.md).
const (
	defaultChunk       = 4 << 20
	defaultCacheChunks = 32
	// defaultReadAhead is enough for a consumer's next fetch of a partition
	// (8 MiB; Kafka's max.partition.fetch.bytes default is 1 MiB) to find
	// its chunks there.
	defaultReadAhead = 2
)

type chunkKey struct {
	id remote.Uuid
	n  int64 // chunk number: bytes [n*chunkSize, (n+1)*chunkSize)
}

// readRange returns bytes [from, to) of a copy's segment (to cut at its
// end), from the chunks, as one slice of its own (copied: the chunks'
// buffers are reused once released).
func (m *Manager) readRange(ctx context.Context, md *remote.SegmentMetadata, from, to int64) ([]byte, error) {
	v, err := m.readVec(ctx, md, from, to)
	if err != nil {
		return nil, err
	}
	b := make([]byte, v.Len())
	v.CopyAt(b, 0)
	v.Release()
	return b, nil
}

// readVec returns bytes [from, to) of a copy's segment (to cut at its end)
// as the chunks' own slices, nothing copied, holding a reference to each
// chunk (chunkBuf): a chunk is never written once read, and its buffer is
// reused only once the cache has dropped it and every read holding it is
// released (engine.Buffers.Release, once its answer is written).
func (m *Manager) readVec(ctx context.Context, md *remote.SegmentMetadata, from, to int64) (engine.Buffers, error) {
	to = min(to, md.SegmentSize)
	cs := m.chunkSize
	var out engine.Buffers
	out.Grow(int(max((to-1)/cs-from/cs+1, 0)))
	last := int64(-1)
	for n := from / cs; n*cs < to; n++ {
		c, err := m.chunk(ctx, md, n)
		if err != nil {
			out.Release()
			return engine.Buffers{}, err
		}
		last = n
		lo, hi := max(from, n*cs)-n*cs, min(to, n*cs+int64(len(c.b)))-n*cs
		if lo >= hi {
			c.Release()
			break
		}
		out.Append(c.b[lo:hi:hi])
		out.Hold(c)
	}
	for n := last + 1; last >= 0 && n <= last+int64(m.prefetch) && n*cs < md.SegmentSize; n++ {
		m.readAhead(md, n)
	}
	return out, nil
}

// chunk returns chunk n of a copy, from the cache or, on a miss, the store
// (one read of a chunk at a time: others wait for it), with a reference
// held for the caller.
func (m *Manager) chunk(ctx context.Context, md *remote.SegmentMetadata, n int64) (*chunkBuf, error) {
	k := chunkKey{md.ID.ID, n}
	for {
		if c, ok := m.cache.get(k, m.pool); ok {
			return c, nil
		}
		m.mu.Lock()
		if ch, ok := m.inflight[k]; ok {
			m.mu.Unlock()
			select {
			case <-ch:
				continue // read (or failed: read it again)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		m.inflight[k] = ch
		m.mu.Unlock()
		c, err := m.fetchRange(ctx, md, n*m.chunkSize, min((n+1)*m.chunkSize, md.SegmentSize))
		if err == nil {
			m.cache.put(k, c)
		}
		m.mu.Lock()
		delete(m.inflight, k)
		close(ch)
		m.mu.Unlock()
		return c, err
	}
}

// readAhead reads chunk n of a copy in the background, unless it is under
// way, when a reader slot is free (requests keep their share of
// remote.log.reader.threads).
func (m *Manager) readAhead(md *remote.SegmentMetadata, n int64) {
	select {
	case m.readers <- struct{}{}:
	default:
		return
	}
	k := chunkKey{md.ID.ID, n}
	m.mu.Lock()
	_, reading := m.inflight[k]
	if m.closed || reading || m.cache.has(k) { // Close waits for wg: no Add once it may have begun
		m.mu.Unlock()
		<-m.readers
		return
	}
	m.wg.Add(1)
	m.mu.Unlock()
	c := *md
	go func() {
		defer m.wg.Done()
		defer func() { <-m.readers }()
		if b, err := m.chunk(m.ctx, &c, n); err == nil { // a failure is the next reader's to meet
			b.Release()
		}
	}()
}

// chunkBuf is a chunk's bytes with a count of the references to them: the
// memory cache's while it holds the chunk, and one for each read whose
// answer lies in them (engine.Buffers, released once the Fetch answer is
// written or dropped). The last release gives a pooled buffer back to its
// pool, and the next chunk read from the store is read into it: a new
// buffer of 4 MiB is zeroed before it is read into, 19% of the broker's CPU
// in a remote catch-up (BENCHMARKS.md). A buffer is never reused while a
// reference to it is held; a reference never released leaves the buffer to
// the garbage collector.
type chunkBuf struct {
	b    []byte
	refs atomic.Int32
	pool *chunkPool // nil: not pooled (a chunk much shorter than the pool's)
}

// Retain implements engine.BufferRef.
func (c *chunkBuf) Retain() {
	if c.refs.Add(1) <= 1 {
		panic("tiered: a chunk buffer retained after its last release")
	}
}

// Release implements engine.BufferRef.
func (c *chunkBuf) Release() {
	switch n := c.refs.Add(-1); {
	case n == 0 && c.pool != nil:
		c.pool.put(c.b)
	case n < 0:
		panic("tiered: a chunk buffer released more often than retained")
	}
}

// chunkPool keeps up to poolChunks free buffers of a chunk's size, the last
// one freed handed out first. Each chunkBuf that lends one is new: a stale
// release of the last one lent panics rather than freeing the next.
type chunkPool struct {
	size int
	mu   struct {
		sync.Mutex
		free [][]byte
	}
	reused atomic.Int64 // buffers handed out again
}

// poolChunks bounds the free buffers kept: chunks leave the cache about as
// fast as new ones are read (one eviction for each), and those held by an
// answer when evicted come back when it is written.
const poolChunks = 8

func newChunkPool(size int64) *chunkPool { return &chunkPool{size: int(size)} }

// get returns a buffer of n bytes, one reference held by the caller. A
// chunk of the pool's size, or short of it by at most a quarter (a
// segment's last chunk, most often just short of a whole one), gets a
// pooled buffer, a free one if there is one; a shorter chunk a buffer of
// its own, so that a buffer held by the cache is never more than 4/3 of
// the bytes it counts. Its bytes are not zeroed: the caller writes them
// all (or cuts the buffer to those written).
func (p *chunkPool) get(n int) *chunkBuf {
	c := &chunkBuf{}
	c.refs.Store(1)
	if n > p.size || n < p.size-p.size/4 {
		c.b = make([]byte, n)
		return c
	}
	c.pool = p
	p.mu.Lock()
	if k := len(p.mu.free); k > 0 {
		c.b = p.mu.free[k-1][:n]
		p.mu.free[k-1] = nil
		p.mu.free = p.mu.free[:k-1]
		p.mu.Unlock()
		p.reused.Add(1)
		return c
	}
	p.mu.Unlock()
	c.b = make([]byte, n, p.size)
	return c
}

// put takes a buffer back (dropped when poolChunks are free).
func (p *chunkPool) put(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.mu.free) < poolChunks {
		p.mu.free = append(p.mu.free, b[:p.size])
	}
}
