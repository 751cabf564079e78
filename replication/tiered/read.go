package tiered

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/engine/remote"
	"github.com/samsa-broker/samsa/replication"
)

// Reads from remote storage (Kafka's RemoteLogReader): the finished copy
// holding the offset, its offset index (8-byte entries: relative offset and
// file position, both big-endian uint32) for the position of the last
// indexed batch at or below the offset, then one byte range of the segment
// from there, long enough for maxBytes and the scan up to the offset, and a
// second range only when the first batch to send is cut off. Ranges are
// served from the chunks read lately (chunks.go).

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
	v, _, err := m.read(ctx, p, offset, maxBytes)
	if err != nil {
		return nil, err
	}
	b := make([]byte, v.Len()) // the caller's to keep: the chunks' buffers are reused
	v.CopyAt(b, 0)
	v.Release()
	return b, nil
}

// read is Read, its batches the chunks' own slices (readVec), and one past
// the last batch's last offset.
func (m *Manager) read(ctx context.Context, p *replication.Partition, offset int64, maxBytes int32) (engine.Buffers, int64, error) {
	if s := p.EngineLog().RemoteLogStart(); offset < s {
		return engine.Buffers{}, 0, fmt.Errorf("%w: offset %d, below the log start %d (DeleteRecords)", replication.ErrOffsetOutOfRange, offset, s)
	}
	md, ok, start := m.copyOf(p, offset)
	if !ok {
		// The listing may be older than a copy; list again once.
		if _, err := m.refresh(p); err != nil {
			return engine.Buffers{}, 0, fmt.Errorf("%w: %w", replication.ErrRemoteStorage, err)
		}
		if md, ok, start = m.copyOf(p, offset); !ok {
			return engine.Buffers{}, 0, fmt.Errorf("%w: offset %d, remote log start %d", replication.ErrOffsetOutOfRange, offset, start)
		}
	}
	select {
	case m.readers <- struct{}{}:
	case <-ctx.Done():
		return engine.Buffers{}, 0, ctx.Err()
	}
	defer func() { <-m.readers }()
	v, end, err := m.readCopy(ctx, &md, offset, maxBytes)
	c := m.stats.topic(md.ID.Topic)
	if err != nil {
		c.fetchErrors.Add(1)
		return engine.Buffers{}, 0, fmt.Errorf("%w: %w", replication.ErrRemoteStorage, err)
	}
	c.fetchBytes.Add(int64(v.Len()))
	return v, end, nil
}

// readCopy reads the batches from offset out of one copy, at most maxBytes
// of them but at least one, as slices of the chunks; and one past the last
// one's last offset.
func (m *Manager) readCopy(ctx context.Context, md *remote.SegmentMetadata, offset int64, maxBytes int32) (engine.Buffers, int64, error) {
	idx, err := m.offsetIndex(ctx, md)
	if err != nil {
		return engine.Buffers{}, 0, err
	}
	pos := indexLookup(idx, offset-md.StartOffset)
	end := min(pos+int64(max(maxBytes, 0))+scanSlack, md.SegmentSize)
	v, err := m.readVec(ctx, md, pos, end)
	if err != nil {
		return engine.Buffers{}, 0, err
	}
	// The batches to send are bytes [first, stop) of v, answered as slices of
	// the chunks: a header spanning two chunks is copied (h) to be read.
	n := v.Len()
	first, stop, next := -1, 0, int64(0)
	var h [batchHeaderLen]byte
	for at := 0; at+batchHeaderLen <= n; {
		v.CopyAt(h[:], at)
		size := int(binary.BigEndian.Uint32(h[8:12])) + 12
		last := int64(binary.BigEndian.Uint64(h[0:8])) + int64(binary.BigEndian.Uint32(h[23:27]))
		if size < batchHeaderLen {
			v.Release()
			return engine.Buffers{}, 0, fmt.Errorf("remote segment %s: a batch of %d bytes at position %d", md.ID, size, pos+int64(at))
		}
		if last < offset {
			at += size
			continue
		}
		if first >= 0 && stop-first+size > int(maxBytes) {
			break
		}
		if at+size > n {
			if first >= 0 {
				break
			}
			// The first batch to send is cut off: read it whole.
			v.Release()
			whole, err := m.readVec(ctx, md, pos+int64(at), pos+int64(at+size))
			if err != nil {
				return engine.Buffers{}, 0, err
			}
			return whole, last + 1, nil
		}
		if first < 0 {
			first = at
		}
		at += size
		stop, next = at, last+1
	}
	if first < 0 {
		v.Release()
		return engine.Buffers{}, 0, fmt.Errorf("remote segment %s holds no batch at offset %d", md.ID, offset)
	}
	return v.Slice(first, stop), next, nil // v's references go with it
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

// fetchRange reads bytes [from, to) of a copy's segment into a buffer of
// the pool, its reference the caller's. The body's bytes are read straight
// into it (io.ReadFull): nothing is zeroed first.
func (m *Manager) fetchRange(ctx context.Context, md *remote.SegmentMetadata, from, to int64) (*chunkBuf, error) {
	rc, err := m.cfg.Storage.FetchLogSegmentRange(ctx, md, from, to-1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	c := m.pool.get(int(to - from))
	n, err := io.ReadFull(rc, c.b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		c.Release()
		return nil, err
	}
	c.b = c.b[:n]
	return c, nil
}

// indexKey names a copy's index in the cache.
type indexKey struct {
	id remote.Uuid
	t  remote.IndexType
}

// offsetIndex returns a copy's offset index, from the cache or the store.
// An index file may end in zeroed entries (preallocated space): only the
// increasing prefix is kept.
func (m *Manager) offsetIndex(ctx context.Context, md *remote.SegmentMetadata) ([]byte, error) {
	return m.index(ctx, md, remote.IndexOffset, func(idx []byte) []byte {
		n := len(idx) / 8
		for i := 1; i < n; i++ {
			if binary.BigEndian.Uint32(idx[i*8:]) <= binary.BigEndian.Uint32(idx[(i-1)*8:]) {
				n = i
				break
			}
		}
		return idx[:n*8]
	})
}

// index returns a copy's index of type t, from the cache or the store
// (trimmed by trim); a copy without a transaction index has an empty one.
func (m *Manager) index(ctx context.Context, md *remote.SegmentMetadata, t remote.IndexType, trim func([]byte) []byte) ([]byte, error) {
	k := indexKey{md.ID.ID, t}
	m.mu.Lock()
	idx, ok := m.idx[k]
	m.mu.Unlock()
	if ok {
		return idx, nil
	}
	rc, err := m.cfg.Storage.FetchIndex(ctx, md, t)
	switch {
	case t == remote.IndexTransaction && errors.Is(err, remote.ErrRemoteResourceNotFound):
		idx = []byte{}
	case err != nil:
		return nil, err
	default:
		idx, err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		idx = trim(idx)
	}
	m.mu.Lock()
	if _, ok := m.idx[k]; !ok {
		m.idx[k] = idx
		m.idxLRU = append(m.idxLRU, k)
		if len(m.idxLRU) > indexCacheEntries {
			delete(m.idx, m.idxLRU[0])
			m.idxLRU = m.idxLRU[1:]
		}
	}
	m.mu.Unlock()
	return idx, nil
}

// forgetIndex drops a deleted copy's indexes and chunks from the caches.
func (m *Manager) forgetIndex(id remote.Uuid) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range remote.IndexTypes {
		delete(m.idx, indexKey{id, t})
	}
	m.cache.forget(id)
}

// txnEntrySize is an entry of a transaction index (engine/txnindex.go,
// Kafka's AbortedTxn): version int16, producer id, first offset, last
// offset, last stable offset (int64 each).
const txnEntrySize = 34

// AbortedTransactions implements replication.RemoteLog, as Kafka's
// RemoteLogManager.collectAbortedTransactions: the entries of the copies
// from the one holding from, while they start below upTo, until an entry's
// last stable offset reaches upTo.
func (m *Manager) AbortedTransactions(ctx context.Context, p *replication.Partition, from, upTo int64) ([]engine.AbortedTxn, error) {
	st := m.state(p)
	if st == nil {
		return nil, nil
	}
	var out []engine.AbortedTxn
	for i := range st.copies {
		c := &st.copies[i]
		if c.EndOffset < from {
			continue
		}
		if c.StartOffset >= upTo {
			break
		}
		idx, err := m.index(ctx, c, remote.IndexTransaction, func(b []byte) []byte { return b[:len(b)/txnEntrySize*txnEntrySize] })
		if err != nil {
			return nil, fmt.Errorf("%w: %w", replication.ErrRemoteStorage, err)
		}
		for e := idx; len(e) >= txnEntrySize; e = e[txnEntrySize:] {
			a := engine.AbortedTxn{ProducerID: int64(binary.BigEndian.Uint64(e[2:])), FirstOffset: int64(binary.BigEndian.Uint64(e[10:])),
				LastOffset: int64(binary.BigEndian.Uint64(e[18:])), LastStableOffset: int64(binary.BigEndian.Uint64(e[26:]))}
			if a.LastOffset >= from && a.FirstOffset < upTo {
				out = append(out, a)
			}
			if a.LastStableOffset >= upTo {
				return out, nil
			}
		}
	}
	return out, nil
}

// timeEntrySize is an entry of a time index: a timestamp (int64) and an
// offset relative to the segment's base (uint32).
const timeEntrySize = 12

// OffsetForTimestamp implements replication.RemoteLog, as Kafka's
// RemoteLogManager.findOffsetByTimestamp: the first copy whose largest
// timestamp reaches ts; in it, from the last time-index entry below ts (by
// the offset index), the first batch whose largest timestamp reaches ts, and
// in it the first record (engine.TimestampInBatch).
func (m *Manager) OffsetForTimestamp(ctx context.Context, p *replication.Partition, ts int64) (int64, int64, bool, error) {
	st := m.state(p)
	if st == nil {
		return 0, 0, false, nil
	}
	start := p.EngineLog().RemoteLogStart()
	for i := range st.copies {
		c := &st.copies[i]
		if c.MaxTimestamp < ts || c.EndOffset < start {
			continue
		}
		off, t, ok, err := m.timestampIn(ctx, c, ts)
		if err != nil {
			return 0, 0, false, fmt.Errorf("%w: %w", replication.ErrRemoteStorage, err)
		}
		if ok && off >= start {
			return off, t, true, nil
		}
		if ok {
			return start, t, true, nil // the record found is deleted: the first one left of its batch's range
		}
	}
	return 0, 0, false, nil
}

// MaxTimestamp implements replication.RemoteLog: of the copies not wholly
// below the log start DeleteRecords raised, the first with the largest
// timestamp (by its metadata's MaxTimestamp, as Kafka's
// RemoteLogSegmentMetadata carries it), and in it the first record with
// that timestamp (timestampIn). The copy holding the log start is passed
// over when that record lies below the start (deleted).
func (m *Manager) MaxTimestamp(ctx context.Context, p *replication.Partition) (int64, int64, bool, error) {
	st := m.state(p)
	if st == nil {
		return 0, 0, false, nil
	}
	start := p.EngineLog().RemoteLogStart()
	passed := -1
	for {
		best := -1
		for i := range st.copies {
			if c := &st.copies[i]; i != passed && c.EndOffset >= start && (best < 0 || c.MaxTimestamp > st.copies[best].MaxTimestamp) {
				best = i
			}
		}
		if best < 0 {
			return 0, 0, false, nil
		}
		c := &st.copies[best]
		off, t, ok, err := m.timestampIn(ctx, c, c.MaxTimestamp)
		if err != nil {
			return 0, 0, false, fmt.Errorf("%w: %w", replication.ErrRemoteStorage, err)
		}
		if ok && off >= start {
			return t, off, true, nil
		}
		if passed >= 0 || c.StartOffset >= start {
			return 0, 0, false, nil
		}
		passed = best
	}
}

// searchChunk is how much of a copy one read of a timestamp search takes.
const searchChunk = 256 << 10

func (m *Manager) timestampIn(ctx context.Context, c *remote.SegmentMetadata, ts int64) (int64, int64, bool, error) {
	tidx, err := m.index(ctx, c, remote.IndexTimestamp, func(b []byte) []byte {
		n := len(b) / timeEntrySize
		for i := 1; i < n; i++ {
			if int64(binary.BigEndian.Uint64(b[i*timeEntrySize:])) <= int64(binary.BigEndian.Uint64(b[(i-1)*timeEntrySize:])) {
				n = i
				break
			}
		}
		return b[:n*timeEntrySize]
	})
	if err != nil {
		return 0, 0, false, err
	}
	from := c.StartOffset
	for e := tidx; len(e) >= timeEntrySize; e = e[timeEntrySize:] {
		if int64(binary.BigEndian.Uint64(e)) >= ts {
			break
		}
		from = c.StartOffset + int64(binary.BigEndian.Uint32(e[8:]))
	}
	oidx, err := m.offsetIndex(ctx, c)
	if err != nil {
		return 0, 0, false, err
	}
	pos := indexLookup(oidx, from-c.StartOffset)
	for pos < c.SegmentSize {
		buf, err := m.readRange(ctx, c, pos, min(pos+searchChunk, c.SegmentSize))
		if err != nil {
			return 0, 0, false, err
		}
		// at: the next batch's position in buf; past its end when a batch
		// runs beyond the chunk (skipped whole, its header read).
		at := int64(0)
		for at+engine.BatchHeaderSize <= int64(len(buf)) {
			h, err := engine.ParseBatchHeader(buf[at:])
			if err != nil {
				return 0, 0, false, err
			}
			if h.MaxTimestamp >= ts && h.NumRecords > 0 {
				b := buf[at:]
				if at+h.Size() > int64(len(buf)) {
					if b, err = m.readRange(ctx, c, pos+at, pos+at+h.Size()); err != nil {
						return 0, 0, false, err
					}
				}
				off, t, err := engine.TimestampInBatch(b, ts)
				return off, t, err == nil, err
			}
			at += h.Size()
		}
		if at == 0 {
			break // no whole header left: the segment's end
		}
		pos += at
	}
	return 0, 0, false, nil
}

// RebuildAuxState implements replication.RemoteLog: from the finished copy
// that ends right before offset, its producer snapshot (restored into the
// empty log) and its leader-epoch checkpoint (the epoch in force at its end
// starts the log). A copy ending elsewhere (copies made by a leader whose
// segments were rolled elsewhere) holds no state as of offset: nothing is
// restored.
func (m *Manager) RebuildAuxState(ctx context.Context, p *replication.Partition, offset int64) error {
	el := p.EngineLog()
	if el == nil {
		return nil
	}
	st, err := m.refresh(p)
	if err != nil {
		return err
	}
	var c *remote.SegmentMetadata
	for i := range st.copies {
		if st.copies[i].EndOffset+1 == offset {
			c = &st.copies[i]
		}
	}
	if c == nil {
		return nil
	}
	snap, err := m.readIndex(ctx, c, remote.IndexProducerSnapshot)
	if err != nil {
		return err
	}
	if len(snap) > 0 {
		if err := el.RestoreProducerSnapshot(snap); err != nil {
			return err
		}
	}
	cp, err := m.readIndex(ctx, c, remote.IndexLeaderEpoch)
	if err != nil {
		return err
	}
	if epoch, ok := lastEpoch(cp); ok {
		return el.AssignEpochStartOffset(epoch, offset)
	}
	return nil
}

// readIndex reads a copy's index of type t whole, from the store.
func (m *Manager) readIndex(ctx context.Context, c *remote.SegmentMetadata, t remote.IndexType) ([]byte, error) {
	rc, err := m.cfg.Storage.FetchIndex(ctx, c, t)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// lastEpoch is the epoch of the last entry of a leader-epoch checkpoint
// ("0", the count, then "epoch offset" per line).
func lastEpoch(cp []byte) (int32, bool) {
	lines := strings.Split(strings.TrimSpace(string(cp)), "\n")
	if len(lines) < 3 {
		return 0, false
	}
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 2 {
		return 0, false
	}
	e, err := strconv.ParseInt(f[0], 10, 32)
	if err != nil || e < 0 {
		return 0, false
	}
	return int32(e), true
}
