package quorum

import (
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// encodeImage is metadata.EncodeSnapshot of an image Apply built (never fails).
func encodeImage(im *metadata.Image) []byte {
	b, err := metadata.EncodeSnapshot(nil, im)
	if err != nil {
		panic(err)
	}
	return b
}

// dropTransport drops every message (a voter alone needs none).
type dropTransport struct{}

func (dropTransport) Send([]*raftpb.Message) {}

func topic(name string) *metadata.TopicRecord {
	var id metadata.UUID
	copy(id[:], fmt.Sprintf("%-16s", name))
	id[0] |= 0x80 // never the zero or metadata-topic id
	return &metadata.TopicRecord{Name: name, ID: id}
}

// result reads a proposal's result that must already be there.
func result(t *testing.T, ch <-chan ProposeResult) ProposeResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	default:
		t.Fatal("proposal not resolved")
		return ProposeResult{}
	}
}

func TestSingleVoterLeadsAtOnceAndCommits(t *testing.T) {
	st := NewMemStorage()
	q, err := New(Config{NodeID: 1, Voters: []int32{1}}, st, dropTransport{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.HandleReady(); err != nil {
		t.Fatal(err)
	}
	if !q.IsLeader() || !q.ReadyForWrites() {
		t.Fatalf("after one HandleReady: leader %v ready %v, status %+v", q.IsLeader(), q.ReadyForWrites(), q.Status())
	}
	ch := q.Propose([]metadata.Record{topic("a")})
	if err := q.HandleReady(); err != nil {
		t.Fatal(err)
	}
	r := result(t, ch)
	if r.Err != nil || r.Offset != 3 {
		t.Fatalf("result %+v, want offset 3 (1 bootstrap snapshot, 2 the leader's empty entry)", r)
	}
	off, im := q.Committed()
	if _, ok := im.Topic("a"); !ok || off != 3 {
		t.Fatalf("committed offset %d, topic a present %v", off, ok)
	}
	// A rejected entry commits, is skipped, and says so.
	ch = q.Propose([]metadata.Record{topic("a")})
	if err := q.HandleReady(); err != nil {
		t.Fatal(err)
	}
	if r := result(t, ch); !errors.Is(r.Err, ErrRejected) || r.Offset != 4 {
		t.Fatalf("duplicate topic: %+v", r)
	}
	res, err := q.ReadCommitted(1, 1<<20)
	if err != nil || !res.SnapshotNeeded || res.SnapshotOffset != 1 {
		t.Fatalf("read from 1: %+v %v", res, err)
	}
	res, err = q.ReadCommitted(2, 1<<20)
	if err != nil || len(res.Entries) != 3 || res.Entries[0].Data != nil || res.Entries[1].Data == nil {
		t.Fatalf("read from 2: %+v %v", res, err)
	}
}

// TestStatusNotBehindResults: when a subscriber sees an applied offset, and so when a
// proposer gets its result, Status already reports a commit index at least that
// high (a broker's metadata barrier reads it right after its write is answered).
func TestStatusNotBehindResults(t *testing.T) {
	q, err := New(Config{NodeID: 1, Voters: []int32{1}}, NewMemStorage(), dropTransport{})
	if err != nil {
		t.Fatal(err)
	}
	var behind []string
	q.Subscribe(func(off uint64, _ *metadata.Image) {
		if st := q.Status(); st.CommitIndex < off || st.AppliedIndex < off {
			behind = append(behind, fmt.Sprintf("offset %d published with status commit %d applied %d", off, st.CommitIndex, st.AppliedIndex))
		}
	})
	if err := q.HandleReady(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		ch := q.Propose([]metadata.Record{topic(fmt.Sprint("t", i))})
		if err := q.HandleReady(); err != nil {
			t.Fatal(err)
		}
		if r := result(t, ch); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if len(behind) > 0 {
		t.Fatalf("status behind the published offsets: %v", behind)
	}
}
