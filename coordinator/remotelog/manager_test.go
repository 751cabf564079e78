package remotelog

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

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

func openNode(t testing.TB, dir string, epoch int32) *node {
	t.Helper()
	n := openBareNode(t, dir, 1, engine.SyncFsync)
	n.lead(t, epoch)
	return n
}

// lead makes node 1 the only replica and leader of every metadata
// partition, at leader epoch epoch.
func (n *node) lead(t testing.TB, epoch int32) {
	t.Helper()
	var d replication.Delta
	for p := range int32(testMetaPartitions) {
		d.Leaders = append(d.Leaders, replication.PartitionState{Topic: Topic, TopicID: [16]byte{9}, Partition: p,
			Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch, MinISR: 1, LogConfig: LogConfig()})
	}
	if err := n.m.Apply(d); err != nil {
		t.Fatal(err)
	}
}

// openBareNode is node id's engine and replica manager over dir, with no
// replicas.
func openBareNode(t testing.TB, dir string, id int32, sync engine.SyncPolicy) *node {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Open(engine.Options{Dirs: []string{dir}, Sync: sync, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m, err := replication.NewManager(replication.Config{NodeID: id, Logs: replication.EngineLogs(eng), Logger: log})
	if err != nil {
		eng.Close()
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

// leaderFor serves a Manager with no replica of the metadata partitions from
// the replicas of the node leader returns, as the leader's Fetch and Produce
// handlers do: a Fetch reads the leader's log from the offset asked up to
// its high watermark, at most maxBytes (capped at fetchMax) but at least one
// batch, or answers OFFSET_OUT_OF_RANGE with the log start; a forwarded
// batch is appended with acks=all.
type leaderFor struct {
	leader   func() *node
	fetchMax int32
	asked    []int64 // the offsets fetched at
}

func (l *leaderFor) log(p int32) *engine.Log {
	return l.leader().m.Partition(engine.TopicPartition{Topic: Topic, Partition: p}).EngineLog()
}

func (l *leaderFor) fetch(_ context.Context, p int32, offset int64, maxBytes int32) (FetchResult, error) {
	l.asked = append(l.asked, offset)
	el := l.log(p)
	res := FetchResult{HighWatermark: el.HighWatermark(), LogStartOffset: el.LogStartOffset()}
	if offset < res.LogStartOffset || offset > el.LogEndOffset() {
		return res, ErrOffsetOutOfRange
	}
	b, err := el.ReadCopy(offset, min(maxBytes, l.fetchMax), res.HighWatermark, true, nil)
	res.Records = b
	return res, err
}

func (l *leaderFor) forward(_ context.Context, p int32, batch []byte) (int64, error) {
	n := l.leader()
	done := make(chan struct{})
	pr := new(replication.Produce)
	pr.Begin(n.m, -1, 5*time.Second, func() { close(done) })
	_, err := pr.Append(n.m.Partition(engine.TopicPartition{Topic: Topic, Partition: p}), slices.Clone(batch))
	pr.Seal()
	<-done
	if err != nil {
		return 0, err
	}
	return pr.Part(0).Result.BaseOffset, pr.Part(0).Err
}

// A node with no replica of the metadata partition reads it from its leader:
// what the leader's node wrote, in fetches of a few records each; what it
// writes itself (through the leader), at once; after a leader change, on
// from where it stopped; from a leader whose log no longer holds that point,
// again from the start.
func TestManagerReadsFromTheLeader(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := openNode(t, dir, 0)
	b := openBareNode(t, t.TempDir(), 2, engine.SyncFsync)
	defer b.close()
	leader := a
	l := &leaderFor{leader: func() *node { return leader }, fetchMax: 200}
	mb := New(Config{Replicas: b.m, Partitions: func() int32 { return testMetaPartitions }, Fetch: l.fetch, Forward: l.forward})

	ma := a.manager()
	var ids []remote.SegmentID
	for i := range int64(5) {
		md := testSegment()
		md.ID.ID, md.StartOffset, md.EndOffset = remote.RandomUuid(), 100*i, 100*i+99
		md.LeaderEpochs = []remote.EpochEntry{{Epoch: 1, StartOffset: md.StartOffset}}
		if err := ma.AddRemoteLogSegmentMetadata(ctx, md); err != nil {
			t.Fatal(err)
		}
		if err := ma.UpdateRemoteLogSegmentMetadata(ctx, &Update{ID: md.ID, BrokerID: 1, State: remote.CopySegmentFinished}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, md.ID)
	}
	check := func(m *Manager, who string, want int, finished int) {
		t.Helper()
		segs, err := m.ListRemoteLogSegments(testTP)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		n := 0
		for _, s := range segs {
			if s.State == remote.CopySegmentFinished {
				n++
			}
		}
		if len(segs) != want || n != finished {
			t.Fatalf("%s lists %d copies, %d finished, want %d, %d: %+v", who, len(segs), n, want, finished, segs)
		}
	}
	check(mb, "the node without a replica", 5, 5)
	if len(l.asked) < 3 {
		t.Fatalf("10 records read in fetches of at most %d bytes at %v", l.fetchMax, l.asked)
	}
	// Its own writes go through the leader and are in its state on return;
	// the leader's node sees them too.
	md := testSegment()
	md.ID.ID, md.StartOffset, md.EndOffset = remote.RandomUuid(), 500, 599
	md.LeaderEpochs = []remote.EpochEntry{{Epoch: 2, StartOffset: 500}}
	if err := mb.AddRemoteLogSegmentMetadata(ctx, md); err != nil {
		t.Fatal(err)
	}
	check(mb, "the node without a replica, after its own write", 6, 5)
	if err := mb.UpdateRemoteLogSegmentMetadata(ctx, &Update{ID: ids[0], BrokerID: 2, State: remote.DeleteSegmentStarted}); err != nil {
		t.Fatal(err)
	}
	check(mb, "the node without a replica, after its own update", 6, 4)
	check(ma, "the leader's node", 6, 4)

	// A new leader (the same log, a new epoch): the reads go on from where
	// they stopped.
	el := l.log(MetadataPartition(testTP, testMetaPartitions))
	end := el.HighWatermark()
	a.close()
	a2 := openNode(t, dir, 1)
	defer a2.close()
	leader = a2
	if err := a2.manager().UpdateRemoteLogSegmentMetadata(ctx, &Update{ID: ids[0], BrokerID: 1, State: remote.DeleteSegmentFinished}); err != nil {
		t.Fatal(err)
	}
	l.asked = nil
	check(mb, "the node without a replica, after the leader changed", 5, 4)
	if len(l.asked) == 0 || l.asked[0] != end {
		t.Fatalf("read at %v after the leader changed, want from %d on", l.asked, end)
	}

	// A leader whose log does not reach that point (a new log): read again
	// from its start, into a fresh state.
	fresh := openNode(t, t.TempDir(), 2)
	defer fresh.close()
	leader = fresh
	check(mb, "the node without a replica, over a new log", 0, 0)
	if err := mb.AddRemoteLogSegmentMetadata(ctx, md); err != nil {
		t.Fatal(err)
	}
	check(mb, "the node without a replica, over a new log, after its write", 1, 0)
}
