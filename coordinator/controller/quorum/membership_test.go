package quorum

import (
	"bytes"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// TestRaftIDs: a static voter's raft id is its node id + 1; a dynamic one's keeps
// the node id in its low half and differs by directory; NodeOf reads both.
func TestRaftIDs(t *testing.T) {
	a, b := metadata.UUID{1}, metadata.UUID{2}
	for _, node := range []int32{0, 1, 7, 1 << 20} {
		if got := NodeOf(RaftID(node)); got != node {
			t.Fatalf("NodeOf(RaftID(%d)) = %d", node, got)
		}
		da, db := DynamicRaftID(node, a), DynamicRaftID(node, b)
		if NodeOf(da) != node || NodeOf(db) != node || da == db || da>>32 == 0 || da == RaftID(node) {
			t.Fatalf("node %d: dynamic raft ids %x and %x", node, da, db)
		}
		if DynamicRaftID(node, a) != da {
			t.Fatal("DynamicRaftID is not a function of its arguments")
		}
	}
	if NodeOf(0) != -1 || NodeOf(1<<40) != -1 {
		t.Fatal("raft's none is not -1")
	}
}

// TestSnapshotFileVersions: a snapshot of a configuration that is not joint is
// written in version 1 (which builds before dynamic quorums read); a joint one in
// version 2; both read back as written.
func TestSnapshotFileVersions(t *testing.T) {
	for _, tc := range []struct {
		cs    *raftpb.ConfState
		magic string
	}{
		{&raftpb.ConfState{Voters: []uint64{1, 2, 3}}, snapMagic},
		{&raftpb.ConfState{Voters: []uint64{1, 2}, Learners: []uint64{9}}, snapMagic},
		{&raftpb.ConfState{Voters: []uint64{1, 2}, VotersOutgoing: []uint64{1, 2, 3}, LearnersNext: []uint64{3}, AutoLeave: proto.Bool(true)}, snapMagic2},
	} {
		snap := &raftpb.Snapshot{Data: []byte("image"), Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(12), Term: proto.Uint64(3), ConfState: raftpb.EnsureConfState(tc.cs)}}
		b := encodeSnapshotFile(snap)
		if string(b[:len(tc.magic)]) != tc.magic {
			t.Fatalf("%v: written as %q, want %q", tc.cs, b[:8], tc.magic)
		}
		got, err := decodeSnapshotFile(b)
		if err != nil {
			t.Fatal(err)
		}
		gc, wc := got.GetMetadata().GetConfState(), raftpb.EnsureConfState(tc.cs)
		if !slices.Equal(gc.GetVoters(), wc.GetVoters()) || !slices.Equal(gc.GetLearners(), wc.GetLearners()) ||
			!slices.Equal(gc.GetVotersOutgoing(), wc.GetVotersOutgoing()) || !slices.Equal(gc.GetLearnersNext(), wc.GetLearnersNext()) ||
			gc.GetAutoLeave() != wc.GetAutoLeave() || !bytes.Equal(got.GetData(), snap.GetData()) || got.GetMetadata().GetIndex() != 12 {
			t.Fatalf("read back %v, wrote %v", got, snap)
		}
		b[len(b)-5] ^= 1
		if _, err := decodeSnapshotFile(b); err == nil {
			t.Fatal("a damaged snapshot file decoded")
		}
	}
}

// TestDiskVoterNotYetAdded: a controller formatted with --no-initial-controllers
// starts as no member on a fresh directory, saves the hard state the leader's
// messages give it before any snapshot (and finds it after a restart), then
// installs the leader's snapshot.
func TestDiskVoterNotYetAdded(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{NodeID: 4, DirectoryID: metadata.UUID{4}}
	st := openDisk(t, nil, dir)
	q, err := New(cfg, st, dropTransport{})
	if err != nil {
		t.Fatal(err)
	}
	if q.self != DynamicRaftID(4, cfg.DirectoryID) || len(q.Members()) != 0 {
		t.Fatalf("raft id %x, members %v", q.self, q.Members())
	}
	leader := DynamicRaftID(1, metadata.UUID{1})
	q.Step(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: proto.Uint64(leader), To: proto.Uint64(q.self), Term: proto.Uint64(3)})
	if err := q.HandleReady(); err != nil {
		t.Fatal(err)
	}
	if l, term := q.Leader(); l != 1 || term != 3 {
		t.Fatalf("leader %d term %d", l, term)
	}
	st.Close()
	st = openDisk(t, nil, dir)
	if hs, _, _ := st.InitialState(); hs.GetTerm() != 3 {
		t.Fatalf("the term was not kept: %v", hs)
	}
	q, err = New(cfg, st, dropTransport{})
	if err != nil {
		t.Fatal(err)
	}
	// The leader's snapshot makes it a learner of the quorum.
	boot := []metadata.Record{&metadata.FeatureLevelRecord{Name: metadata.FeatureKRaftVersion, Level: 1},
		&metadata.VotersRecord{Voters: []metadata.QuorumVoter{
			{ID: 1, DirectoryID: metadata.UUID{1}, RaftID: leader, Endpoints: []metadata.VoterEndpoint{{Name: "CONTROLLER", Host: "a", Port: 1}}},
			{ID: 4, DirectoryID: cfg.DirectoryID, RaftID: q.self, Learner: true, Endpoints: []metadata.VoterEndpoint{{Name: "CONTROLLER", Host: "d", Port: 4}}}}},
		topic("t1")}
	im, err := (&metadata.Image{}).Apply(boot...)
	if err != nil {
		t.Fatal(err)
	}
	snap := &raftpb.Snapshot{Data: encodeImage(im), Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(40), Term: proto.Uint64(3),
		ConfState: raftpb.EnsureConfState(&raftpb.ConfState{Voters: []uint64{leader}, Learners: []uint64{q.self}})}}
	q.Step(&raftpb.Message{Type: raftpb.MsgSnap.Enum(), From: proto.Uint64(leader), To: proto.Uint64(q.self), Term: proto.Uint64(3), Snapshot: snap})
	if err := q.HandleReady(); err != nil {
		t.Fatal(err)
	}
	off, got := q.Committed()
	if _, ok := got.Topic("t1"); off != 40 || !ok {
		t.Fatalf("after the snapshot: offset %d", off)
	}
	ms := q.Members()
	if len(ms) != 2 || ms[1].RaftID != q.self || ms[1].Voter || ms[1].Endpoints[0].Host != "d" {
		t.Fatalf("members %+v", ms)
	}
	st.Close()
	st = openDisk(t, nil, dir)
	defer st.Close()
	if q, err = New(cfg, st, dropTransport{}); err != nil {
		t.Fatal(err)
	}
	if off, _ := q.Committed(); off != 40 || q.self != DynamicRaftID(4, cfg.DirectoryID) {
		t.Fatalf("after a restart: offset %d, raft id %x", off, q.self)
	}
}

// TestDynamicBootstrapAndIdentity: --standalone's records bootstrap a quorum of one
// that leads at once; a restart with another directory id is refused.
func TestDynamicBootstrapAndIdentity(t *testing.T) {
	dir := t.TempDir()
	id := metadata.UUID{7}
	self := metadata.QuorumVoter{ID: 1, DirectoryID: id, RaftID: DynamicRaftID(1, id), Endpoints: []metadata.VoterEndpoint{{Name: "CONTROLLER", Host: "h", Port: 9093}}}
	boot := []metadata.Record{&metadata.FeatureLevelRecord{Name: metadata.FeatureKRaftVersion, Level: 1}, &metadata.VotersRecord{Voters: []metadata.QuorumVoter{self}}}
	st := openDisk(t, nil, dir)
	q, err := New(Config{NodeID: 1, DirectoryID: id, FormatRecords: boot}, st, dropTransport{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.HandleReady(); err != nil {
		t.Fatal(err)
	}
	if !q.ReadyForWrites() || q.self != self.RaftID {
		t.Fatalf("ready %v, raft id %x", q.ReadyForWrites(), q.self)
	}
	st.Close()
	st = openDisk(t, nil, dir)
	defer st.Close()
	if _, err := New(Config{NodeID: 1, DirectoryID: metadata.UUID{8}}, st, dropTransport{}); err == nil {
		t.Fatal("a restart under another directory id was accepted as the voter")
	}
	if _, err := New(Config{NodeID: 1, DirectoryID: id, Voters: []int32{1}}, st, dropTransport{}); err != nil {
		t.Fatalf("controller.quorum.voters beside a log that records its voters: %v", err)
	}
}
