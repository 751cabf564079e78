package tiered

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/samsa-broker/samsa/engine/remote"
	"github.com/samsa-broker/samsa/replication"
)

// Reads from remote storage (Kafka's RemoteLogReader): the finished copy
// holding the offset, its offset index (8-byte entries: relative offset and
// file position, both big-endian uint32) for the position of the last
// indexed batch at or below the offset, then one byte range of the segment
// from there, long enough for maxBytes and the scan up to the offset, and a
// second range only when the first batch to send is cut off.

// indexCacheEntries is how many copies' offset indexes stay in memory.
const indexCacheEntries = 64

// scanSlack is read past maxBytes to reach the offset from the indexed
// position: index.interval.bytes (4 KiB by default) and a margin.
const scanSlack = 64 << 10

// batchHeaderLen is the part of a batch header that gives its length and
// last offset: base offset (8), length (4), leader epoch (4), magic (1),
// CRC (4), attributes (2), last offset delta (4).
const batchHeaderLen = 27

// Read implements replication.RemoteLog.
func (m *Manager) Read(ctx context.Context, p *replication.Partition, offset int64, maxBytes int32) ([]byte, error) {
	md, ok, start := m.copyOf(p, offset)
	if !ok {
		// The listing may be older than a copy; list again once.
		if _, err := m.refresh(p); err != nil {
			return nil, fmt.Errorf("%w: %w", replication.ErrRemoteStorage, err)
		}
		if md, ok, start = m.copyOf(p, offset); !ok {
			return nil, fmt.Errorf("%w: offset %d, remote log start %d", replication.ErrOffsetOutOfRange, offset, start)
		}
	}
	select {
	case m.readers <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-m.readers }()
	b, err := m.readCopy(ctx, &md, offset, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", replication.ErrRemoteStorage, err)
	}
	return b, nil
}

func (m *Manager) readCopy(ctx context.Context, md *remote.SegmentMetadata, offset int64, maxBytes int32) ([]byte, error) {
	idx, err := m.offsetIndex(ctx, md)
	if err != nil {
		return nil, err
	}
	pos := indexLookup(idx, offset-md.StartOffset)
	end := min(pos+int64(max(maxBytes, 0))+scanSlack, md.SegmentSize)
	buf, err := m.fetchRange(ctx, md, pos, end)
	if err != nil {
		return nil, err
	}
	var out []byte
	for at := 0; at+batchHeaderLen <= len(buf); {
		h := buf[at:]
		size := int(binary.BigEndian.Uint32(h[8:12])) + 12
		last := int64(binary.BigEndian.Uint64(h[0:8])) + int64(binary.BigEndian.Uint32(h[23:27]))
		if size < batchHeaderLen {
			return nil, fmt.Errorf("remote segment %s: a batch of %d bytes at position %d", md.ID, size, pos+int64(at))
		}
		if last < offset {
			at += size
			continue
		}
		if len(out) > 0 && len(out)+size > int(maxBytes) {
			break
		}
		if at+size > len(buf) {
			if len(out) > 0 {
				break
			}
			// The first batch to send is cut off: read it whole.
			whole, err := m.fetchRange(ctx, md, pos+int64(at), pos+int64(at+size))
			if err != nil {
				return nil, err
			}
			return whole, nil
		}
		out = append(out, buf[at:at+size]...)
		at += size
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("remote segment %s holds no batch at offset %d", md.ID, offset)
	}
	return out, nil
}

// indexLookup is the position of the last entry at or below rel (0: none).
func indexLookup(idx []byte, rel int64) int64 {
	n := len(idx) / 8
	i := sort.Search(n, func(i int) bool { return int64(binary.BigEndian.Uint32(idx[i*8:])) > rel })
	if i == 0 {
		return 0
	}
	return int64(binary.BigEndian.Uint32(idx[(i-1)*8+4:]))
}

// fetchRange reads bytes [from, to) of a copy's segment.
func (m *Manager) fetchRange(ctx context.Context, md *remote.SegmentMetadata, from, to int64) ([]byte, error) {
	rc, err := m.cfg.Storage.FetchLogSegmentRange(ctx, md, from, to-1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf := make([]byte, to-from)
	n, err := io.ReadFull(rc, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	return buf[:n], nil
}

// offsetIndex returns a copy's offset index, from the cache or the store.
func (m *Manager) offsetIndex(ctx context.Context, md *remote.SegmentMetadata) ([]byte, error) {
	m.mu.Lock()
	idx, ok := m.idx[md.ID.ID]
	m.mu.Unlock()
	if ok {
		return idx, nil
	}
	rc, err := m.cfg.Storage.FetchIndex(ctx, md, remote.IndexOffset)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	idx, err = io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	// An index file may end in zeroed entries (preallocated space): keep
	// the increasing prefix.
	n := len(idx) / 8
	for i := 1; i < n; i++ {
		if binary.BigEndian.Uint32(idx[i*8:]) <= binary.BigEndian.Uint32(idx[(i-1)*8:]) {
			n = i
			break
		}
	}
	idx = idx[:n*8]
	m.mu.Lock()
	if _, ok := m.idx[md.ID.ID]; !ok {
		m.idx[md.ID.ID] = idx
		m.idxLRU = append(m.idxLRU, md.ID.ID)
		if len(m.idxLRU) > indexCacheEntries {
			delete(m.idx, m.idxLRU[0])
			m.idxLRU = m.idxLRU[1:]
		}
	}
	m.mu.Unlock()
	return idx, nil
}

// forgetIndex drops a deleted copy's index from the cache.
func (m *Manager) forgetIndex(id remote.Uuid) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.idx, id)
}
