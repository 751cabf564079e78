package remotelog

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/engine/remote"
	"github.com/samsa-broker/samsa/replication"
)

const testMetaPartitions = 5

// node is one broker's engine and replica manager over dir, leading every
// metadata partition at leader epoch epoch.
type node struct {
	eng *engine.Manager
	m   *replication.Manager
}

func openNode(t *testing.T, dir string, epoch int32) *node {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Open(engine.Options{Dirs: []string{dir}, Sync: engine.SyncFsync, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m, err := replication.NewManager(replication.Config{NodeID: 1, Logs: replication.EngineLogs(eng), Logger: log})
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	var d replication.Delta
	for p := range int32(testMetaPartitions) {
		d.Leaders = append(d.Leaders, replication.PartitionState{Topic: Topic, TopicID: [16]byte{9}, Partition: p,
			Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch, MinISR: 1, LogConfig: LogConfig()})
	}
	if err := m.Apply(d); err != nil {
		t.Fatal(err)
	}
	return &node{eng: eng, m: m}
}

func (n *node) close() {
	n.m.Close()
	n.eng.Close()
}

func (n *node) manager() *Manager {
	return New(Config{Replicas: n.m, Partitions: func() int32 { return testMetaPartitions }})
}

// The states of a copy, written by one leader, read back by the next one
// (a node restarted at a new leader epoch replays the metadata partition);
// the rules of Kafka's cache hold on both.
func TestManagerStatesSurviveLeaderChange(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	n := openNode(t, dir, 0)
	m := n.manager()

	a, b := testSegment(), testSegment()
	b.ID.ID, b.StartOffset, b.EndOffset = remote.RandomUuid(), 200, 299
	b.LeaderEpochs = []remote.EpochEntry{{Epoch: 5, StartOffset: 200}}
	for _, md := range []*remote.SegmentMetadata{a, b} {
		if err := m.AddRemoteLogSegmentMetadata(ctx, md); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.UpdateRemoteLogSegmentMetadata(ctx, &Update{ID: a.ID, BrokerID: 1, EventTimestamp: 5, State: remote.CopySegmentFinished}); err != nil {
		t.Fatal(err)
	}
	// An invalid move and an unknown copy are refused.
	if err := m.UpdateRemoteLogSegmentMetadata(ctx, &Update{ID: a.ID, State: remote.CopySegmentStarted}); !errors.Is(err, remote.ErrInvalidMetadata) {
		t.Fatalf("FINISHED → STARTED: %v", err)
	}
	unknown := a.ID
	unknown.ID = remote.RandomUuid()
	if err := m.UpdateRemoteLogSegmentMetadata(ctx, &Update{ID: unknown, State: remote.CopySegmentFinished}); !errors.Is(err, remote.ErrRemoteResourceNotFound) {
		t.Fatalf("an unknown copy: %v", err)
	}
	// A second copy of a's offsets is a new id; deleting it to the end
	// removes it.
	c := testSegment()
	c.ID.ID = remote.RandomUuid()
	if err := m.AddRemoteLogSegmentMetadata(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, st := range []remote.SegmentState{remote.DeleteSegmentStarted, remote.DeleteSegmentFinished} {
		if err := m.UpdateRemoteLogSegmentMetadata(ctx, &Update{ID: c.ID, BrokerID: 1, State: st}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(m *Manager, who string) {
		t.Helper()
		segs, err := m.ListRemoteLogSegments(testTP)
		if err != nil {
			t.Fatal(err)
		}
		if len(segs) != 2 || segs[0].ID != a.ID || segs[0].State != remote.CopySegmentFinished || segs[0].EventTimestamp != 5 ||
			segs[1].ID != b.ID || segs[1].State != remote.CopySegmentStarted || len(segs[0].LeaderEpochs) != 2 {
			t.Fatalf("%s lists %+v", who, segs)
		}
		other := testTP
		other.Partition = 4
		if segs, err := m.ListRemoteLogSegments(other); err != nil || len(segs) != 0 {
			t.Fatalf("%s lists %v (%v) for a partition without copies", who, segs, err)
		}
	}
	check(m, "the writer")
	check(n.manager(), "a second manager on the same replicas")
	n.close()

	n2 := openNode(t, dir, 1)
	defer n2.close()
	m2 := n2.manager()
	check(m2, "the next leader")
	// The next leader finishes what its predecessor left started.
	if err := m2.UpdateRemoteLogSegmentMetadata(ctx, &Update{ID: b.ID, BrokerID: 1, State: remote.DeleteSegmentStarted}); err != nil {
		t.Fatal(err)
	}
	if segs, _ := m2.ListRemoteLogSegments(testTP); len(segs) != 2 || segs[1].State != remote.DeleteSegmentStarted {
		t.Fatalf("after the next leader's update: %+v", segs)
	}
}

func TestManagerNotReady(t *testing.T) {
	n := openNode(t, t.TempDir(), 0)
	defer n.close()
	m := New(Config{Replicas: n.m, Partitions: func() int32 { return 0 }})
	if _, err := m.ListRemoteLogSegments(testTP); !errors.Is(err, ErrNotReady) {
		t.Fatalf("without the topic: %v", err)
	}
	m = New(Config{Replicas: n.m, Partitions: func() int32 { return testMetaPartitions + 10 }})
	for p := range int32(200) {
		tp := testTP
		tp.Partition = p
		if MetadataPartition(tp, testMetaPartitions+10) >= testMetaPartitions {
			if _, err := m.ListRemoteLogSegments(tp); !errors.Is(err, ErrNotReady) {
				t.Fatalf("without a replica of the metadata partition: %v", err)
			}
			return
		}
	}
	t.Fatal("no partition maps past the replicas held")
}
