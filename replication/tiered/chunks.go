package tiered

import (
	"context"

	"github.com/samsa-broker/samsa/engine/remote"
)

// Segment bytes are read from remote storage in aligned chunks of readChunk
// bytes, the last chunkCacheEntries of which stay in memory: a consumer
// reading a copy in order gets one GET per chunk, not one per fetch, and
// the chunk after one that missed is read ahead while the consumer works
// through it. (Aiven's plugin keeps such chunks on local disk,
// fetch.chunk.cache.*; here they are in memory, 32 MiB at most.)
const (
	readChunk         = 4 << 20
	chunkCacheEntries = 8
)

type chunkKey struct {
	id remote.Uuid
	n  int64 // chunk number: bytes [n*readChunk, (n+1)*readChunk)
}

// chunkCache is the chunks read lately and those being read (under
// Manager.mu).
type chunkCache struct {
	data     map[chunkKey][]byte
	lru      []chunkKey
	inflight map[chunkKey]chan struct{} // closed when the read ends
}

// readRange returns bytes [from, to) of a copy's segment (to cut at its
// end), from the chunks.
func (m *Manager) readRange(ctx context.Context, md *remote.SegmentMetadata, from, to int64) ([]byte, error) {
	to = min(to, md.SegmentSize)
	out := make([]byte, 0, max(to-from, 0))
	for n := from / readChunk; n*readChunk < to; n++ {
		b, err := m.chunk(ctx, md, n, true)
		if err != nil {
			return nil, err
		}
		lo, hi := max(from, n*readChunk)-n*readChunk, min(to, n*readChunk+int64(len(b)))-n*readChunk
		if lo >= hi {
			break
		}
		out = append(out, b[lo:hi]...)
	}
	return out, nil
}

// chunk returns chunk n of a copy, reading it on a miss; with ahead, the
// read of chunk n+1 starts too unless it is there or under way.
func (m *Manager) chunk(ctx context.Context, md *remote.SegmentMetadata, n int64, ahead bool) ([]byte, error) {
	if ahead && (n+1)*readChunk < md.SegmentSize {
		defer m.readAhead(md, n+1)
	}
	k := chunkKey{md.ID.ID, n}
	for {
		m.mu.Lock()
		if b, ok := m.chunks.data[k]; ok {
			m.mu.Unlock()
			return b, nil
		}
		if ch, ok := m.chunks.inflight[k]; ok {
			m.mu.Unlock()
			select {
			case <-ch:
				continue // read (or failed: read it again)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		m.chunks.inflight[k] = ch
		m.mu.Unlock()
		b, err := m.fetchRange(ctx, md, n*readChunk, min((n+1)*readChunk, md.SegmentSize))
		m.mu.Lock()
		delete(m.chunks.inflight, k)
		close(ch)
		if err == nil {
			m.chunks.data[k] = b
			m.chunks.lru = append(m.chunks.lru, k)
			if len(m.chunks.lru) > chunkCacheEntries {
				delete(m.chunks.data, m.chunks.lru[0])
				m.chunks.lru = m.chunks.lru[1:]
			}
		}
		m.mu.Unlock()
		return b, err
	}
}

// readAhead reads chunk n of a copy in the background, unless it is there
// or under way, when a reader slot is free (requests keep their share of
// remote.log.reader.threads).
func (m *Manager) readAhead(md *remote.SegmentMetadata, n int64) {
	select {
	case m.readers <- struct{}{}:
	default:
		return
	}
	k := chunkKey{md.ID.ID, n}
	m.mu.Lock()
	_, cached := m.chunks.data[k]
	_, reading := m.chunks.inflight[k]
	if m.closed || cached || reading { // Close waits for wg: no Add once it may have begun
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
		_, _ = m.chunk(m.ctx, &c, n, false) // a failure is the next reader's to meet
	}()
}

// forgetChunks drops a deleted copy's chunks.
func (m *Manager) forgetChunksLocked(id remote.Uuid) {
	kept := m.chunks.lru[:0]
	for _, k := range m.chunks.lru {
		if k.id == id {
			delete(m.chunks.data, k)
			continue
		}
		kept = append(kept, k)
	}
	m.chunks.lru = kept
}
