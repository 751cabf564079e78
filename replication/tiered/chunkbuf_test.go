package tiered_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/internal/s3test"
	"github.com/samsa-broker/samsa/replication/tiered"
)

// A chunk's buffer is reused only once no read holds it: a read's records
// held (as a Fetch answer holds them until written) stay as read while the
// memory cache, of one chunk, evicts their chunks and the chunks read after
// them are read into reused buffers (the last one freed first: one of the
// held chunks, were it freed at its eviction); released, their buffers go
// back to the pool.
func TestChunkBufferReusedOnlyOnceReleased(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	const chunk = 4 << 10
	cache, err := tiered.NewChunkCache(tiered.ChunkCacheConfig{Size: chunk})
	if err != nil {
		t.Fatal(err)
	}
	n := openNode(t, t.TempDir(), 0, sm, dataConfig(), func(c *tiered.Config) { c.ChunkCache, c.ChunkSize = cache, chunk })
	defer n.close()
	n.produce(t, 0, 600)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	end := n.data.LocalLogStartOffset()
	held, err := n.data.FetchRemote(0, 12<<10, false)
	if err != nil || held.Records.Len() < 2*chunk || len(held.Records.Bufs) < 3 {
		t.Fatalf("the held read: %d bytes in %d slices, %v", held.Records.Len(), len(held.Records.Bufs), err)
	}
	next := checkProduced(t, "the held read", held.Records.Bytes())
	reused0, _ := tiered.ChunkBuffers(n.rlm)
	reads := 0
	for off := next; off < end; reads++ {
		r, err := n.data.FetchRemote(off, 8<<10, false)
		if err != nil || r.Records.Len() == 0 {
			t.Fatalf("read at %d: %d bytes, %v", off, r.Records.Len(), err)
		}
		off = checkProduced(t, fmt.Sprintf("the read at %d", off), r.Records.Bytes())
		r.Records.Release()
	}
	reused, free := tiered.ChunkBuffers(n.rlm)
	if reused-reused0 < 4 {
		t.Fatalf("%d reads past the held one: %d chunk buffers reused, want some", reads, reused-reused0)
	}
	checkProduced(t, fmt.Sprintf("the held read, after %d reads reused %d buffers", reads, reused-reused0), held.Records.Bytes())
	held.Records.Release()
	if _, free2 := tiered.ChunkBuffers(n.rlm); free2 < free+2 {
		t.Fatalf("the held read released: %d buffers free, %d before: want its chunks' (2 or more)", free2, free)
	}
}

// checkProduced checks that b holds whole batches of the records produce
// wrote (key and value from the offset), in order, and returns one past the
// last.
func checkProduced(t *testing.T, what string, b []byte) int64 {
	t.Helper()
	want := int64(-1)
	err := engine.ForEachRecordInBatches(b, func(r engine.Record) error {
		if want >= 0 && r.Offset != want || string(r.Key) != fmt.Sprint(r.Offset) || !bytes.Equal(r.Value, bytes.Repeat([]byte{byte(r.Offset)}, 200)) {
			return fmt.Errorf("record at offset %d (after %d): key %q, %d bytes of value", r.Offset, want-1, r.Key, len(r.Value))
		}
		want = r.Offset + 1
		return nil
	})
	if err != nil || want < 0 {
		t.Fatalf("%s: %d bytes: %v", what, len(b), err)
	}
	return want
}
