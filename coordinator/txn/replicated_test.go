package txn

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// replicaNode is one broker's engine and replica manager.
type replicaNode struct {
	eng *engine.Manager
	m   *replication.Manager
}

func newReplicaNode(t *testing.T, id int32, dir string) *replicaNode {
	t.Helper()
	eng, err := engine.Open(engine.Options{Dirs: []string{dir}, Sync: engine.SyncFsync, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := replication.NewManager(replication.Config{NodeID: id, Logs: replication.EngineLogs(eng), Logger: quietLogger()})
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	n := &replicaNode{eng: eng, m: m}
	t.Cleanup(func() { m.Close(); eng.Close() })
	return n
}

// lead makes this node the only replica and leader, at leader epoch epoch,
// of the state partitions and of data-0 and data-1.
func (n *replicaNode) lead(t *testing.T, parts, epoch int32) {
	t.Helper()
	var d replication.Delta
	for p := range parts {
		d.Leaders = append(d.Leaders, replication.PartitionState{Topic: StateTopic, TopicID: [16]byte{1}, Partition: p,
			Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch, MinISR: 1, LogConfig: StateLogConfig()})
	}
	for p := range int32(2) {
		d.Leaders = append(d.Leaders, replication.PartitionState{Topic: "data", TopicID: [16]byte{2}, Partition: p,
			Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch, MinISR: 1,
			LogConfig: engine.DefaultLogConfig()})
	}
	if err := n.m.Apply(d); err != nil {
		t.Fatal(err)
	}
}

// produce appends a transactional batch to data-p through replication,
// with KIP-890's verification against c, and waits for it.
func (n *replicaNode) produce(t *testing.T, c *Coordinator, id string, pid int64, epoch int16, seq int32, p int32) error {
	t.Helper()
	r := n.m.Partition(engine.TopicPartition{Topic: "data", Partition: p})
	el := r.Log().(*engine.Log)
	if g, needed := el.StartTxnVerification(pid, epoch, seq); needed {
		tp := TopicPartition{"data", p}
		if code := c.VerifyPartitions(id, pid, epoch, []TopicPartition{tp})[tp]; code != 0 {
			return kerr.ErrorForCode(code)
		}
		el.CompleteTxnVerification(pid, g)
	}
	b, err := engine.AppendProducerRecords(nil, engine.BatchProducer{ID: pid, Epoch: epoch, BaseSequence: seq, Transactional: true},
		[]engine.Record{{Key: []byte("k"), Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	pr := new(replication.Produce)
	done := make(chan struct{})
	pr.Begin(n.m, -1, 5*time.Second, func() { close(done) })
	_, aerr := pr.Append(r, b)
	pr.Seal()
	<-done
	if aerr != nil {
		return aerr
	}
	return pr.Part(0).Err
}

// wait calls f with a done and waits for its answer.
func wait[T any](t *testing.T, f func(func(T))) T {
	t.Helper()
	ch := make(chan T, 1)
	f(func(r T) { ch <- r })
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
		panic("unreachable")
	}
}

// TestReplicatedEndToEnd runs transactions through the cluster's parts on
// one node: the coordinator over ReplicatedLog, markers through
// MarkerWriter (acks=all, the engine's marker checks), data through
// replication with verification; then a reload of the coordinator at the
// next leader epoch finds the states, and the data partitions' index and
// last stable offset say what was committed and aborted.
func TestReplicatedEndToEnd(t *testing.T) {
	n := newReplicaNode(t, 1, t.TempDir())
	const parts = 3
	n.lead(t, parts, 0)
	clock := newFakeClock()
	writer := NewMarkerWriter(n.m, time.Second, clock.Now)
	var offsetMarkers []int32
	writer.OnOffsetsMarker = func(p int32, pid int64, commit bool) { offsetMarkers = append(offsetMarkers, p) }
	mc := &Markers{Self: 1, Image: func() *metadata.Image { return nil }, Local: writer}
	local := markerFunc{leader: func(TopicPartition) (int32, bool, bool) { return 1, true, true }, send: mc.Send}
	cfg := Config{NumPartitions: parts, Clock: clock, Logger: quietLogger(), MaxTimeout: time.Minute}
	c := New(cfg, NewReplicatedLog(n.m, time.Second), local, &counterPIDs{})
	for p := range int32(parts) {
		if err := c.LoadPartition(p, 0); err != nil {
			t.Fatal(err)
		}
	}
	id := "etl"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 30_000
	ir := wait(t, func(done func(*kmsg.InitProducerIDResponse)) { c.InitProducerID(init, done) })
	if ir.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(ir.ErrorCode))
	}
	pid := ir.ProducerID
	add := func(p int32) {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = 3, id, pid, 0
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = "data", []int32{p}
		req.Topics = append(req.Topics, rt)
		// The markers of the last end may still be going: the client retries.
		var code int16
		eventually(t, "partition added", func() bool {
			r := wait(t, func(done func(*kmsg.AddPartitionsToTxnResponse)) { c.AddPartitionsToTxn(req, nil, done) })
			code = r.Topics[0].Partitions[0].ErrorCode
			return code != kerr.ConcurrentTransactions.Code
		})
		if code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	end := func(commit bool) {
		req := kmsg.NewPtrEndTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = 3, id, pid, 0, commit
		r := wait(t, func(done func(*kmsg.EndTxnResponse)) { c.EndTxn(req, done) })
		if r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
	}
	// KIP-890: a produce to a partition not in the transaction is refused.
	if err := n.produce(t, c, id, pid, 0, 0, 0); !errors.Is(err, kerr.TransactionAbortable) {
		t.Fatalf("produce outside the transaction: %v", err)
	}
	// Commit a transaction over both partitions, abort one over data-1.
	add(0)
	add(1)
	seq := map[int32]int32{}
	for i, p := range []int32{0, 1, 0} {
		if err := n.produce(t, c, id, pid, 0, seq[p], p); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		seq[p]++
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = id, pid, 0, "g"
	if r := wait(t, func(done func(*kmsg.AddOffsetsToTxnResponse)) { c.AddOffsetsToTxn(ao, done) }); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	end(true)
	add(1)
	if err := n.produce(t, c, id, pid, 0, 1, 1); err != nil {
		t.Fatal(err)
	}
	end(false)
	eventually(t, "transactions complete", func() bool {
		d := describeOne(c, id)
		return d.State == "CompleteAbort"
	})
	for p := int32(0); p < 2; p++ {
		l := n.m.Partition(engine.TopicPartition{Topic: "data", Partition: p}).Log().(*engine.Log)
		if lso, hw := l.LastStableOffset(), l.HighWatermark(); lso != hw || hw != l.LogEndOffset() {
			t.Fatalf("data-%d: LSO %d HW %d LEO %d", p, lso, hw, l.LogEndOffset())
		}
		ab := l.AbortedTransactions(0, l.LogEndOffset(), nil)
		if p == 0 && len(ab) != 0 || p == 1 && (len(ab) != 1 || ab[0].ProducerID != pid) {
			t.Fatalf("data-%d aborted %+v", p, ab)
		}
	}
	// The offsets partition was in the committed transaction: its marker
	// could not be written (no replica of __consumer_offsets here), and the
	// coordinator dropped it once the partition was unknown to the channel;
	// the hook saw none.
	if len(offsetMarkers) != 0 {
		t.Fatalf("offsets markers %v", offsetMarkers)
	}
	// A coordinator at the next leader epoch loads what was logged.
	c.Close()
	n.lead(t, parts, 1)
	c2 := New(cfg, NewReplicatedLog(n.m, time.Second), local, &counterPIDs{next: 5000})
	for p := range int32(parts) {
		if err := c2.LoadPartition(p, 1); err != nil {
			t.Fatal(err)
		}
	}
	if d := describeOne(c2, id); d.State != "CompleteAbort" || d.ProducerID != pid {
		t.Fatalf("reloaded %+v", d)
	}
	c2.Close()
}

type markerFunc struct {
	leader func(TopicPartition) (int32, bool, bool)
	send   func(int32, *kmsg.WriteTxnMarkersRequest, func(*kmsg.WriteTxnMarkersResponse, error))
}

func (m markerFunc) Leader(tp TopicPartition) (int32, bool, bool) {
	if tp.Topic == OffsetsTopic {
		return -1, false, false
	}
	return m.leader(tp)
}
func (m markerFunc) Send(b int32, req *kmsg.WriteTxnMarkersRequest, done func(*kmsg.WriteTxnMarkersResponse, error)) {
	m.send(b, req, done)
}

func describeOne(c *Coordinator, id string) kmsg.DescribeTransactionsResponseTransactionState {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	return c.DescribeTransactions(req).TransactionStates[0]
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestMarkerWriterErrors: markers refused by the engine come back with the
// codes the coordinator's retry rules know.
func TestMarkerWriterErrors(t *testing.T) {
	n := newReplicaNode(t, 1, t.TempDir())
	n.lead(t, 1, 0)
	w := NewMarkerWriter(n.m, time.Second, nil)
	write := func(epoch int16, coord int32, tps ...TopicPartition) map[TopicPartition]int16 {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		mk := kmsg.NewWriteTxnMarkersRequestMarker()
		mk.ProducerID, mk.ProducerEpoch, mk.CoordinatorEpoch, mk.Committed = 42, epoch, coord, true
		for _, g := range groupByTopic(tps) {
			rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			rt.Topic, rt.Partitions = g.topic, g.parts
			mk.Topics = append(mk.Topics, rt)
		}
		req.Markers = append(req.Markers, mk)
		resp := wait(t, func(done func(*kmsg.WriteTxnMarkersResponse)) { w.WriteTxnMarkers(req, done) })
		out := map[TopicPartition]int16{}
		for _, rt := range resp.Markers[0].Topics {
			for _, p := range rt.Partitions {
				out[TopicPartition{rt.Topic, p.Partition}] = p.ErrorCode
			}
		}
		return out
	}
	d0, nope := TopicPartition{"data", 0}, TopicPartition{"nope", 0}
	if got := write(3, 5, d0, nope); got[d0] != 0 || got[nope] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("first markers %v", got)
	}
	if got := write(2, 5, d0); got[d0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("older producer epoch %v", got)
	}
	if got := write(3, 4, d0); got[d0] != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("older coordinator epoch %v", got)
	}
	if got := write(4, 5); len(got) != 0 {
		t.Fatalf("no partitions %v", got)
	}
}

// TestMarkersLeaderFromImage: the broker's MarkerChannel reads leaders
// from the metadata image.
func TestMarkersLeaderFromImage(t *testing.T) {
	im, err := (&metadata.Image{}).Apply(
		&metadata.RegisterBrokerRecord{ID: 2, Epoch: 1, Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}},
		&metadata.RegisterBrokerRecord{ID: 3, Epoch: 2, Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 2}}, Fenced: true},
		&metadata.TopicRecord{Name: "t", ID: metadata.UUID{1}},
		&metadata.PartitionRecord{TopicID: metadata.UUID{1}, Partition: 0, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2},
		&metadata.PartitionRecord{TopicID: metadata.UUID{1}, Partition: 1, Replicas: []int32{3}, ISR: []int32{3}, Leader: 3},
		&metadata.PartitionRecord{TopicID: metadata.UUID{1}, Partition: 2, Replicas: []int32{2}, ISR: []int32{2}, Leader: -1},
	)
	if err != nil {
		t.Fatal(err)
	}
	mc := &Markers{Self: 1, Image: func() *metadata.Image { return im }}
	for _, tc := range []struct {
		tp         TopicPartition
		broker     int32
		ok, exists bool
	}{
		{TopicPartition{"t", 0}, 2, true, true}, {TopicPartition{"t", 1}, -1, false, true},
		{TopicPartition{"t", 2}, -1, false, true}, {TopicPartition{"t", 3}, -1, false, false}, {TopicPartition{"gone", 0}, -1, false, false},
	} {
		b, ok, exists := mc.Leader(tc.tp)
		if b != tc.broker || ok != tc.ok || exists != tc.exists {
			t.Errorf("Leader(%v) = %d %v %v, want %d %v %v", tc.tp, b, ok, exists, tc.broker, tc.ok, tc.exists)
		}
	}
	var sent int32 = -1
	mc.Remote = func(b int32, req *kmsg.WriteTxnMarkersRequest, done func(*kmsg.WriteTxnMarkersResponse, error)) {
		sent = b
		done(nil, errNetwork)
	}
	mc.Send(2, kmsg.NewPtrWriteTxnMarkersRequest(), func(_ *kmsg.WriteTxnMarkersResponse, err error) {
		if !errors.Is(err, errNetwork) {
			t.Errorf("remote send: %v", err)
		}
	})
	if sent != 2 {
		t.Fatalf("remote send went to %d", sent)
	}
}

// TestReplicatedLogReplay: a transactional id's state written through a single
// node's leader replica is loaded by a new coordinator from the same log.
func TestReplicatedLogReplay(t *testing.T) {
	n := newReplicaNode(t, 1, t.TempDir())
	n.lead(t, 2, 0)
	l := NewReplicatedLog(n.m, 0)
	h := &harness{t: t, clock: newFakeClock(), log: nil, markers: newFakeMarkers(), pids: &counterPIDs{}}
	h.cfg = Config{NumPartitions: 2, Clock: h.clock, Logger: quietLogger()}
	h.c = New(h.cfg, l, h.markers, h.pids)
	for p := range int32(2) {
		if err := h.c.LoadPartition(p, 0); err != nil {
			t.Fatal(err)
		}
	}
	pid := wait(t, func(done func(*kmsg.InitProducerIDResponse)) {
		id := "e"
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 1000
		h.c.InitProducerID(req, done)
	}).ProducerID
	h.c.Close()
	c := New(h.cfg, NewReplicatedLog(n.m, 0), h.markers, h.pids)
	defer c.Close()
	for p := range int32(2) {
		if err := c.LoadPartition(p, 1); err != nil {
			t.Fatal(err)
		}
	}
	if d := describeOne(c, "e"); d.ProducerID != pid || d.State != "Empty" {
		t.Fatalf("replayed %+v", d)
	}
}
