package peer

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// metaLog is a committed metadata log as a voter keeps it, served over the wire the
// way docs/CLUSTER.md frames it: entries from offset first on (earlier ones compacted
// behind the snapshot), the snapshot of the image at offset first-1.
type metaLog struct {
	mu       sync.Mutex
	first    uint64
	entries  [][]byte // entry frames of offsets first, first+1, ...
	snapshot []byte
	snapTerm int64
	leader   int32
	// replaceAfter, when > 0, swaps in a new snapshot after that many chunks served.
	replaceAfter int
	served       int
}

func (ml *metaLog) handle(s *served) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	switch req := s.req.(type) {
	case *kmsg.FetchRequest:
		p := req.Topics[0].Partitions[0]
		resp := kmsg.NewPtrFetchResponse()
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = req.Topics[0].Topic, req.Topics[0].TopicID
		rp := kmsg.NewFetchResponseTopicPartition()
		hw := ml.first + uint64(len(ml.entries))
		rp.HighWatermark = int64(hw)
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = ml.leader, 5
		off := uint64(p.FetchOffset)
		if off < ml.first {
			rp.SnapshotID.EndOffset, rp.SnapshotID.Epoch = int64(ml.first), int32(ml.snapTerm)
		} else {
			var b []byte
			for o := off; o < hw && len(b) < int(req.MaxBytes); o++ {
				b = AppendMetadataEntry(b, o, ml.entries[o-ml.first])
			}
			rp.RecordBatches = b
		}
		rt.Partitions = []kmsg.FetchResponseTopicPartition{rp}
		resp.Topics = []kmsg.FetchResponseTopic{rt}
		s.respond(resp)
	case *kmsg.FetchSnapshotRequest:
		p := req.Topics[0].Partitions[0]
		resp := kmsg.NewPtrFetchSnapshotResponse()
		rt := kmsg.NewFetchSnapshotResponseTopic()
		rt.Topic = req.Topics[0].Topic
		rp := kmsg.NewFetchSnapshotResponseTopicPartition()
		rp.SnapshotID.EndOffset, rp.SnapshotID.Epoch = int64(ml.first), int32(ml.snapTerm)
		if p.SnapshotID.EndOffset >= 0 && (p.SnapshotID.EndOffset != int64(ml.first) || p.SnapshotID.Epoch != int32(ml.snapTerm)) {
			rp.ErrorCode = kerr.SnapshotNotFound.Code
		} else {
			end := min(p.Position+int64(req.MaxBytes), int64(len(ml.snapshot)))
			rp.Size, rp.Position, rp.Bytes = int64(len(ml.snapshot)), p.Position, ml.snapshot[p.Position:end]
			ml.served++
			if ml.replaceAfter > 0 && ml.served == ml.replaceAfter {
				ml.first++ // a newer snapshot replaces it
				ml.snapTerm++
				ml.entries = ml.entries[1:]
			}
		}
		rt.Partitions = []kmsg.FetchSnapshotResponseTopicPartition{rp}
		resp.Topics = []kmsg.FetchSnapshotResponseTopic{rt}
		s.respond(resp)
	default:
		s.tr.Ticket.CloseConn()
	}
}

// buildLog returns n entry frames creating topics t0, t1, ... and the image after them.
func buildLog(t *testing.T, n int) ([][]byte, []*metadata.Image) {
	t.Helper()
	im := &metadata.Image{}
	var frames [][]byte
	images := []*metadata.Image{im}
	for i := range n {
		id := metadata.NewUUID()
		recs := metadata.CreateTopicRecords("t"+string(rune('a'+i%26))+string(rune('a'+i/26)), id, [][]int32{{1}}, nil)
		next, err := im.Apply(recs...)
		if err != nil {
			t.Fatal(err)
		}
		im = next
		frames = append(frames, metadata.EncodeEntry(nil, recs...))
		images = append(images, im)
	}
	return frames, images
}

func TestMetadataSourceFetch(t *testing.T) {
	frames, images := buildLog(t, 30)
	// Offsets 1..30; an entry without records (raft's empty entry) at 31.
	ml := &metaLog{first: 1, entries: append(frames, nil), leader: 2}
	ts := startTestServer(t, ml.handle)
	c := newTestClient(t, Config{NodeID: 9, Voters: map[int32]string{2: ts.addr()}})
	src := c.MetadataSource()
	im := &metadata.Image{}
	next := uint64(1)
	for next < 32 {
		b, err := src.Fetch(ctxT(t, 5*time.Second), next, 300, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if b.HighWatermark != 32 || b.Leader != 2 || b.Term != 5 {
			t.Fatalf("batch hw %d leader %d term %d", b.HighWatermark, b.Leader, b.Term)
		}
		if len(b.Entries) == 0 {
			t.Fatalf("no entries at %d", next)
		}
		for _, e := range b.Entries {
			if e.Offset != next {
				t.Fatalf("entry %d, want %d", e.Offset, next)
			}
			if len(e.Data) > 0 {
				recs, _, err := metadata.DecodeEntry(e.Data)
				if err != nil {
					t.Fatal(err)
				}
				if im, err = im.Apply(recs...); err != nil {
					t.Fatal(err)
				}
			}
			next++
		}
	}
	if im.NumTopics() != images[30].NumTopics() || im.NumTopics() != 30 {
		t.Fatalf("%d topics, want 30", im.NumTopics())
	}
	if c.Leader() != 2 {
		t.Fatalf("leader hint %d", c.Leader())
	}
	// At the end: no entries, the high watermark.
	b, err := src.Fetch(ctxT(t, 5*time.Second), 32, 300, 10*time.Millisecond)
	if err != nil || len(b.Entries) != 0 || b.HighWatermark != 32 {
		t.Fatalf("at the end: %v %+v", err, b)
	}
}

func TestMetadataSourceSnapshot(t *testing.T) {
	frames, images := buildLog(t, 40)
	snap, err := metadata.EncodeSnapshot(nil, images[20])
	if err != nil {
		t.Fatal(err)
	}
	// Entries 1..20 are compacted behind the snapshot at 20.
	ml := &metaLog{first: 21, entries: frames[20:], snapshot: snap, snapTerm: 3, leader: 1}
	ts := startTestServer(t, ml.handle)
	c := newTestClient(t, Config{NodeID: 9, Voters: map[int32]string{1: ts.addr()}})
	src := c.MetadataSource()
	src.SnapshotChunk = 100 // many chunks
	_, err = src.Fetch(ctxT(t, 5*time.Second), 1, 1<<20, 0)
	var sn *SnapshotNeededError
	if !errors.Is(err, controller.ErrSnapshotNeeded) || !errors.As(err, &sn) || sn.SnapshotOffset != 20 || sn.SnapshotTerm != 3 {
		t.Fatalf("compacted offset: %v", err)
	}
	off, data, err := src.Snapshot(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if off != 20 || !bytes.Equal(data, snap) {
		t.Fatalf("snapshot at %d, %d bytes (want 20, %d)", off, len(data), len(snap))
	}
	got, err := metadata.DecodeSnapshot(data)
	if err != nil || got.NumTopics() != 20 {
		t.Fatalf("decoded snapshot: %v, %d topics", err, got.NumTopics())
	}
	// The next fetch from the snapshot's offset + 1 continues the log.
	b, err := src.Fetch(ctxT(t, 5*time.Second), off+1, 1<<20, 0)
	if err != nil || len(b.Entries) != 20 || b.Entries[0].Offset != 21 {
		t.Fatalf("after the snapshot: %v, %d entries", err, len(b.Entries))
	}
}

func TestMetadataSourceSnapshotReplacedMidway(t *testing.T) {
	frames, images := buildLog(t, 10)
	snap, err := metadata.EncodeSnapshot(nil, images[5])
	if err != nil {
		t.Fatal(err)
	}
	ml := &metaLog{first: 6, entries: frames[5:], snapshot: snap, snapTerm: 1, replaceAfter: 2}
	ts := startTestServer(t, ml.handle)
	c := newTestClient(t, Config{NodeID: 9, Voters: map[int32]string{1: ts.addr()}})
	src := c.MetadataSource()
	src.SnapshotChunk = 50
	// The snapshot changes after two chunks: the reader starts over with the new one
	// (here the same bytes under a new id; what matters is the id it reports).
	off, data, err := src.Snapshot(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if off != 6 || !bytes.Equal(data, snap) {
		t.Fatalf("snapshot at %d (%d bytes), want the replacement at 6", off, len(data))
	}
}

func TestMetadataSourceRefusesHugeSnapshot(t *testing.T) {
	ts := startTestServer(t, func(s *served) {
		resp := kmsg.NewPtrFetchSnapshotResponse()
		rt := kmsg.NewFetchSnapshotResponseTopic()
		rp := kmsg.NewFetchSnapshotResponseTopicPartition()
		rp.SnapshotID.EndOffset, rp.SnapshotID.Epoch, rp.Size = 10, 1, 1<<50
		rt.Partitions = []kmsg.FetchSnapshotResponseTopicPartition{rp}
		resp.Topics = []kmsg.FetchSnapshotResponseTopic{rt}
		s.respond(resp)
	})
	c := newTestClient(t, Config{NodeID: 9, Voters: map[int32]string{1: ts.addr()}})
	if _, _, err := c.MetadataSource().Snapshot(ctxT(t, 5*time.Second)); !errors.Is(err, ErrSnapshotTooLarge) {
		t.Fatalf("2^50-byte snapshot: %v", err)
	}
}

func TestMetadataSourceHostileEntries(t *testing.T) {
	cases := map[string][]byte{
		"gap":       AppendMetadataEntry(AppendMetadataEntry(nil, 5, nil), 7, nil),
		"truncated": AppendMetadataEntry(nil, 5, []byte("abc"))[:13],
		"long":      append(AppendMetadataEntry(nil, 5, nil)[:8], 0xff, 0xff, 0xff, 0xff),
		"past hw":   AppendMetadataEntry(AppendMetadataEntry(nil, 5, nil), 6, nil),
	}
	for name, records := range cases {
		t.Run(name, func(t *testing.T) {
			ts := startTestServer(t, func(s *served) {
				resp := kmsg.NewPtrFetchResponse()
				rt := kmsg.NewFetchResponseTopic()
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.HighWatermark, rp.RecordBatches = 6, records
				rt.Partitions = []kmsg.FetchResponseTopicPartition{rp}
				resp.Topics = []kmsg.FetchResponseTopic{rt}
				s.respond(resp)
			})
			c := newTestClient(t, Config{NodeID: 9, Voters: map[int32]string{1: ts.addr()}})
			if _, err := c.MetadataSource().Fetch(ctxT(t, 5*time.Second), 5, 1<<20, 0); !errors.Is(err, ErrMalformedEntries) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

func TestDecodeMetadataEntries(t *testing.T) {
	frame := metadata.EncodeEntry(nil, &metadata.ConfigRecord{Resource: metadata.ResourceBroker, Key: "k", Value: metadata.StringPtr("v")})
	b := AppendMetadataEntry(nil, 10, frame)
	b = AppendMetadataEntry(b, 11, nil)
	b = AppendMetadataEntry(b, 12, frame)
	got, err := DecodeMetadataEntries(nil, b, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !bytes.Equal(got[0].Data, frame) || got[1].Data != nil || got[2].Offset != 12 {
		t.Fatalf("decoded %+v", got)
	}
	if want := 2*MetadataEntrySize(len(frame)) + MetadataEntrySize(0); len(b) != want {
		t.Fatalf("%d bytes framed, MetadataEntrySize says %d", len(b), want)
	}
	if _, err := DecodeMetadataEntries(nil, b, 9); !errors.Is(err, ErrMalformedEntries) {
		t.Fatalf("wrong start: %v", err)
	}
}
