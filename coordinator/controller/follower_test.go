package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func entry(off uint64, recs ...metadata.Record) MetadataEntry {
	if len(recs) == 0 {
		return MetadataEntry{Offset: off}
	}
	return MetadataEntry{Offset: off, Data: metadata.EncodeEntry(nil, recs...)}
}

func TestFollowerApply(t *testing.T) {
	f := NewMetadataFollower(FollowerConfig{})
	type pub struct {
		off      uint64
		old, new *metadata.Image
	}
	var pubs []pub
	f.Subscribe(func(off uint64, old, new *metadata.Image) { pubs = append(pubs, pub{off, old, new}) })
	reg := &metadata.RegisterBrokerRecord{ID: 1, Epoch: 1, Endpoints: []metadata.Endpoint{{Name: "P", Host: "h", Port: 1}}}
	topicA := &metadata.TopicRecord{Name: "a", ID: topicID("a")}
	if err := f.Apply(MetadataBatch{Entries: []MetadataEntry{entry(1), entry(2, reg), entry(3, topicA)}, HighWatermark: 4, Leader: 7, Term: 3}); err != nil {
		t.Fatal(err)
	}
	off, im := f.Image()
	if off != 3 || im.NumTopics() != 1 || len(pubs) != 1 || pubs[0].off != 3 || pubs[0].old.NumTopics() != 0 {
		t.Fatalf("after batch: off %d, pubs %+v", off, pubs)
	}
	if l, term := f.Leader(); l != 7 || term != 3 || f.HighWatermark() != 4 {
		t.Fatalf("leader %d term %d hw %d", l, term, f.HighWatermark())
	}
	// A retried batch is skipped; a gap is refused whole.
	if err := f.Apply(MetadataBatch{Entries: []MetadataEntry{entry(2, reg), entry(3, topicA)}}); err != nil || len(pubs) != 1 {
		t.Fatalf("retried batch: %v, %d publications", err, len(pubs))
	}
	if err := f.Apply(MetadataBatch{Entries: []MetadataEntry{entry(5)}}); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("gap: %v", err)
	}
	// A rejected entry (topic exists) is skipped but its offset passes; a corrupt one
	// stops the batch after what came before it is published.
	bad := entry(6, topicA)
	bad.Data = append([]byte(nil), bad.Data...)
	bad.Data[len(bad.Data)-1] ^= 0xff
	err := f.Apply(MetadataBatch{Entries: []MetadataEntry{entry(4, topicA), entry(5, &metadata.TopicRecord{Name: "b", ID: topicID("b")}), bad, entry(7)}})
	if !errors.Is(err, metadata.ErrCorrupt) {
		t.Fatalf("corrupt: %v", err)
	}
	if off, im := f.Image(); off != 5 || im.NumTopics() != 2 {
		t.Fatalf("after the corrupt entry: offset %d, %d topics", off, im.NumTopics())
	}
	if p := pubs[len(pubs)-1]; p.old != pubs[len(pubs)-2].new || p.off != 5 {
		t.Fatal("publications do not chain")
	}
	// A snapshot jumps ahead; an older one is ignored.
	_, cur := f.Image()
	snap, _ := metadata.EncodeSnapshot(nil, mustApply(t, cur, &metadata.TopicRecord{Name: "c", ID: topicID("c")}))
	if err := f.InstallSnapshot(40, snap); err != nil {
		t.Fatal(err)
	}
	if err := f.InstallSnapshot(30, snap); err != nil {
		t.Fatal(err)
	}
	if off, im := f.Image(); off != 40 || im.NumTopics() != 3 {
		t.Fatalf("after snapshot: offset %d, %d topics", off, im.NumTopics())
	}
	if err := f.InstallSnapshot(50, []byte("junk")); !errors.Is(err, metadata.ErrCorrupt) {
		t.Fatalf("bad snapshot: %v", err)
	}
}

// TestFollowerRunOverLog follows a live MemLog through LogSource, across a
// compaction that forces a snapshot.
func TestFollowerRunOverLog(t *testing.T) {
	log, v := NewSingleMemLog(1)
	f := NewMetadataFollower(FollowerConfig{Wait: 20 * time.Millisecond, Backoff: time.Millisecond})
	propose := func(recs ...metadata.Record) {
		if r := <-v.Propose(recs); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for i := range 5 {
		name := string(rune('a' + i))
		propose(&metadata.TopicRecord{Name: name, ID: topicID(name)})
	}
	log.Compact()
	propose(&metadata.TopicRecord{Name: "z", ID: topicID("z")})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.Run(ctx, LogSource{Log: v}) }()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := f.WaitFor(wctx, log.End()); err != nil {
		t.Fatalf("follower stuck at %v: %v", f.HighWatermark(), err)
	}
	_, im := f.Image()
	_, want := log.Image()
	if im.NumTopics() != 6 || !sameImages(im, want) {
		t.Fatalf("follower image has %d topics", im.NumTopics())
	}
	propose(&metadata.TopicRecord{Name: "y", ID: topicID("y")})
	if err := f.WaitFor(wctx, log.End()); err != nil {
		t.Fatal(err)
	}
}

// sameImages compares two images by their canonical records.
func sameImages(a, b *metadata.Image) bool {
	x, err1 := metadata.EncodeSnapshot(nil, a)
	y, err2 := metadata.EncodeSnapshot(nil, b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
