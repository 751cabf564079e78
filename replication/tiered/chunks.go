package tiered

import (
	"context"

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
// end), from the chunks, as one slice (copied when they span chunks).
func (m *Manager) readRange(ctx context.Context, md *remote.SegmentMetadata, from, to int64) ([]byte, error) {
	v, err := m.readVec(ctx, md, from, to)
	return v.Bytes(), err
}

// readVec returns bytes [from, to) of a copy's segment (to cut at its end)
// as the chunks' own slices, nothing copied: a chunk is never written once
// read (the memory cache holds the slice it was read into, the disk cache
// reads a new one on each hit), and a slice held by a read outlives its
// eviction from the cache.
func (m *Manager) readVec(ctx context.Context, md *remote.SegmentMetadata, from, to int64) (engine.Buffers, error) {
	to = min(to, md.SegmentSize)
	cs := m.chunkSize
	var out engine.Buffers
	last := int64(-1)
	for n := from / cs; n*cs < to; n++ {
		b, err := m.chunk(ctx, md, n)
		if err != nil {
			return nil, err
		}
		last = n
		lo, hi := max(from, n*cs)-n*cs, min(to, n*cs+int64(len(b)))-n*cs
		if lo >= hi {
			break
		}
		out = append(out, b[lo:hi:hi])
	}
	for n := last + 1; last >= 0 && n <= last+int64(m.prefetch) && n*cs < md.SegmentSize; n++ {
		m.readAhead(md, n)
	}
	return out, nil
}

// chunk returns chunk n of a copy, from the cache or, on a miss, the store
// (one read of a chunk at a time: others wait for it).
func (m *Manager) chunk(ctx context.Context, md *remote.SegmentMetadata, n int64) ([]byte, error) {
	k := chunkKey{md.ID.ID, n}
	for {
		if b, ok := m.cache.get(k); ok {
			return b, nil
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
		b, err := m.fetchRange(ctx, md, n*m.chunkSize, min((n+1)*m.chunkSize, md.SegmentSize))
		if err == nil {
			m.cache.put(k, b)
		}
		m.mu.Lock()
		delete(m.inflight, k)
		close(ch)
		m.mu.Unlock()
		return b, err
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
		_, _ = m.chunk(m.ctx, &c, n) // a failure is the next reader's to meet
	}()
}
