package kafka

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/controllerapi"
	"github.com/samsa-broker/samsa/net/peer"
	"github.com/samsa-broker/samsa/net/transport"
)

// quorumAdapter is controller.Quorum over a real raft voter: the seam net/node wires
// the same way.
type quorumAdapter struct{ q *quorum.Quorum }

func (a quorumAdapter) Propose(recs []metadata.Record) <-chan controller.ProposeResult {
	in := a.q.Propose(recs)
	out := make(chan controller.ProposeResult, 1)
	go func() {
		r := <-in
		out <- controller.ProposeResult{Offset: r.Offset, Err: r.Err}
	}()
	return out
}

func (a quorumAdapter) Committed() (uint64, *metadata.Image) { return a.q.Committed() }

func (a quorumAdapter) CurrentLeadership() controller.Leadership {
	l := a.q.CurrentLeadership()
	return controller.Leadership{Leader: l.Leader, Term: l.Term, IsLeader: l.IsLeader, ReadyForWrites: l.ReadyForWrites}
}

func (a quorumAdapter) Status() controller.QuorumStatus {
	s := a.q.Status()
	out := controller.QuorumStatus{NodeID: s.NodeID, Leader: s.Leader, Term: s.Term, CommitIndex: s.CommitIndex, LastIndex: s.LastIndex}
	for _, v := range s.Voters {
		out.Voters = append(out.Voters, controller.VoterStatus{ID: v.ID, MatchIndex: v.MatchIndex, LastContact: v.LastContact, LastCaughtUp: v.LastCaughtUp})
	}
	return out
}

// testVoter is one voter served on a real listener: its raft quorum (in memory), its
// controller, the controller listener's handler and a peer client for its raft
// messages.
type testVoter struct {
	id   int32
	addr string
	q    *quorum.Quorum
	ctrl *controller.Controller
	h    *controllerapi.Handler
	cl   *peer.Client
	tr   transport.Transport
	stop func()
}

type voterOptions struct {
	snapshotEntries uint64
	sessionTimeout  time.Duration // broker sessions (0: broker.session.timeout.ms)
	checkListener   func(context.Context, metadata.Endpoint) controller.ListenerState
	// security, when set, secures the controller listeners; peerSecurity is how the
	// voters dial each other then.
	security     *ListenerSecurity
	peerSecurity peer.Security
	static       map[string]string // the controllers' node keys (controller.Config.Static)
}

// startVoters starts one voter per id, each on 127.0.0.1:0, wired to the others
// through net/peer's raft transport.
func startVoters(t testing.TB, o voterOptions, ids ...int32) []*testVoter {
	t.Helper()
	lns := map[int32]net.Listener{}
	addrs := map[int32]string{}
	var eps []controllerapi.VoterEndpoint
	for _, id := range ids {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id], addrs[id] = ln, ln.Addr().String()
		eps = append(eps, controllerapi.VoterEndpoint{ID: id, Host: "127.0.0.1", Port: int32(ln.Addr().(*net.TCPAddr).Port)})
	}
	var out []*testVoter
	for _, id := range ids {
		v := &testVoter{id: id, addr: addrs[id]}
		var err error
		if v.cl, err = peer.New(peer.Config{NodeID: id, ClusterID: "test-cluster", Voters: addrs, Logger: testLogger(t),
			ReconnectBackoff: 5 * time.Millisecond, ReconnectBackoffMax: 50 * time.Millisecond, VoterSecurity: o.peerSecurity}); err != nil {
			t.Fatal(err)
		}
		if v.q, err = quorum.New(quorum.Config{NodeID: id, Voters: ids, TickInterval: 10 * time.Millisecond, SnapshotEntries: o.snapshotEntries, Logger: testLogger(t)},
			quorum.NewMemStorage(), v.cl.RaftTransport()); err != nil {
			t.Fatal(err)
		}
		if v.ctrl, err = controller.New(controller.Config{NodeID: id, ClusterID: "test-cluster", Logger: testLogger(t), TickInterval: 10 * time.Millisecond, SessionTimeout: o.sessionTimeout,
			CheckListener: o.checkListener, Static: o.static}, quorumAdapter{v.q}); err != nil {
			t.Fatal(err)
		}
		cfg := controllerapi.Config{Rules: AuthzRule, NodeID: id, ClusterID: "test-cluster", Voters: eps, Security: o.security}
		if o.security != nil && o.security.Authorizer != nil {
			q := v.q
			cfg.Image = func() *metadata.Image { _, im := q.Committed(); return im }
		}
		if v.h, err = controllerapi.New(cfg, v.ctrl, v.q, testLogger(t)); err != nil {
			t.Fatal(err)
		}
		v.tr = transport.NewStd(transport.Config{}, v.h, testLogger(t))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, 3)
		go func() { v.q.Run(ctx); done <- struct{}{} }()
		go func() { v.ctrl.Run(ctx); done <- struct{}{} }()
		ln := lns[id]
		go func() { v.tr.Serve(ln); done <- struct{}{} }()
		var stop func()
		var once sync.Once
		v.stop = func() { once.Do(stop) }
		stop = func() {
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			v.tr.Shutdown(sctx)
			scancel()
			v.h.Close()
			cancel()
			for range 3 {
				<-done
			}
			v.cl.Close()
			if n := v.h.Panics(); n != 0 {
				t.Errorf("voter %d: %d handler panics", id, n)
			}
		}
		t.Cleanup(v.stop)
		out = append(out, v)
	}
	return out
}

// brokerClient is a broker-side peer client to the voters.
func brokerClient(t *testing.T, vs []*testVoter) *peer.Client {
	t.Helper()
	addrs := map[int32]string{}
	for _, v := range vs {
		addrs[v.id] = v.addr
	}
	cl, err := peer.New(peer.Config{NodeID: 100, ClusterID: "test-cluster", Voters: addrs, Logger: testLogger(t),
		ReconnectBackoff: 5 * time.Millisecond, ReconnectBackoffMax: 50 * time.Millisecond, RetryBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func registration(id int32) *kmsg.BrokerRegistrationRequest {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.ClusterID, req.IncarnationID = id, "test-cluster", [16]byte{byte(id), 1}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", 9092+uint16(id)
	req.Listeners = []kmsg.BrokerRegistrationRequestListener{l}
	return req
}

// A three-voter quorum over real TCP: raft messages travel as SamsaRaft, a broker's
// requests find the active controller from any voter, and the metadata log reaches
// the broker from a voter's controller listener.
func TestControllerListenerQuorumOfThree(t *testing.T) {
	vs := startVoters(t, voterOptions{}, 1, 2, 3)
	cl := brokerClient(t, vs)
	ctx := testCtx(t)
	resp, err := cl.ControllerChannel().Request(ctx, registration(7))
	if err != nil {
		t.Fatal(err)
	}
	rr := resp.(*kmsg.BrokerRegistrationResponse)
	if rr.ErrorCode != 0 || rr.BrokerEpoch <= 0 {
		t.Fatalf("registration: %+v", rr)
	}
	leader := cl.Leader()
	if leader < 1 || leader > 3 {
		t.Fatalf("leader hint %d", leader)
	}
	// Every voter commits the registration; a broker reads it from any of them.
	for _, v := range vs {
		eventually(t, 10*time.Second, "the registration on every voter", func() bool {
			_, im := v.q.Committed()
			b, ok := im.Broker(7)
			return ok && b.Epoch == rr.BrokerEpoch
		})
	}
	src := cl.MetadataSource()
	im := replayMetadata(t, ctx, src)
	if b, ok := im.Broker(7); !ok || b.Epoch != rr.BrokerEpoch || !b.Fenced {
		t.Fatalf("broker 7 in the fetched image: %+v %v", b, ok)
	}
	// DescribeQuorum reaches the leader through the channel.
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: peer.MetadataTopic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	resp, err = cl.ControllerChannel().Request(ctx, dq)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.(*kmsg.DescribeQuorumResponse).Topics[0].Partitions[0]
	if p.LeaderID != leader || len(p.CurrentVoters) != 3 || p.HighWatermark < 2 {
		t.Fatalf("describe quorum: %+v", p)
	}
	// The leader's voter dies: the others elect a new leader and the channel finds it.
	for _, v := range vs {
		if v.id == leader {
			v.stop()
		}
	}
	resp, err = cl.ControllerChannel().Request(ctx, registration(8))
	if err != nil || resp.(*kmsg.BrokerRegistrationResponse).ErrorCode != 0 {
		t.Fatalf("registration after the leader died: %v %+v", err, resp)
	}
	if cl.Leader() == leader {
		t.Fatalf("still asking the dead leader %d", leader)
	}
}

// The connection a broker heartbeats on is reported to the controller when it
// closes: a broker whose process is gone (its connections closed, its endpoint
// refusing) is fenced at once, long before its session (9 s) expires.
func TestControllerListenerReportsClosedHeartbeatConns(t *testing.T) {
	var gone atomic.Bool
	var checks atomic.Int32
	vs := startVoters(t, voterOptions{checkListener: func(context.Context, metadata.Endpoint) controller.ListenerState {
		checks.Add(1)
		if gone.Load() {
			return controller.ListenerRefuses
		}
		return controller.ListenerAccepts
	}}, 1)
	cl := brokerClient(t, vs)
	ctx := testCtx(t)
	resp, err := cl.ControllerChannel().Request(ctx, registration(7))
	if err != nil {
		t.Fatal(err)
	}
	epoch := resp.(*kmsg.BrokerRegistrationResponse).BrokerEpoch
	unfenced := func() bool {
		_, im := vs[0].q.Committed()
		b, ok := im.Broker(7)
		return ok && !b.Fenced
	}
	eventually(t, 10*time.Second, "broker 7 unfenced", func() bool {
		off, _ := vs[0].q.Committed()
		hb := kmsg.NewPtrBrokerHeartbeatRequest()
		hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = 7, epoch, int64(off)
		if _, err := cl.ControllerChannel().Request(ctx, hb); err != nil {
			t.Fatal(err)
		}
		return unfenced()
	})
	eventually(t, 10*time.Second, "the controller's first check of broker 7", func() bool { return checks.Load() > 0 })
	gone.Store(true)
	cl.Close() // the broker's process dies: its connections close
	eventually(t, 2*time.Second, "broker 7 fenced once its heartbeat connection closed", func() bool { return !unfenced() })
}

// replayMetadata reads the whole committed log through src (snapshot first when the
// log starts with one) into an image.
func replayMetadata(t *testing.T, ctx context.Context, src *peer.MetadataSource) *metadata.Image {
	t.Helper()
	f := controller.NewMetadataFollower(controller.FollowerConfig{})
	for {
		off, _ := f.Image()
		b, err := src.Fetch(ctx, off+1, 1<<20, 0)
		if errors.Is(err, controller.ErrSnapshotNeeded) {
			soff, data, err := src.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.InstallSnapshot(soff, data); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Apply(b); err != nil {
			t.Fatal(err)
		}
		if off, im := f.Image(); off+1 >= b.HighWatermark {
			return im
		}
	}
}

// A metadata fetch with nothing new waits for the next commit; a fetch below the
// compacted log answers with the snapshot to read.
func TestControllerListenerMetadataFetch(t *testing.T) {
	vs := startVoters(t, voterOptions{snapshotEntries: 3}, 1)
	cl := brokerClient(t, vs)
	ctx := testCtx(t)
	ch := cl.ControllerChannel()
	if _, err := ch.Request(ctx, registration(5)); err != nil {
		t.Fatal(err)
	}
	src := cl.MetadataSource()
	hw := vs[0].q.Status().CommitIndex + 1
	got := make(chan error, 1)
	go func() {
		b, err := src.Fetch(ctx, hw, 1<<20, 10*time.Second)
		if err == nil && (len(b.Entries) == 0 || b.Entries[0].Offset != hw) {
			err = errors.New("the long poll returned no new entry")
		}
		got <- err
	}()
	if _, err := ch.Request(ctx, registration(6)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// More entries than two snapshot intervals: the start of the log is compacted.
	for id := int32(10); id < 20; id++ {
		if _, err := ch.Request(ctx, registration(id)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "compaction", func() bool { return vs[0].q.Status().FirstIndex > 2 })
	if _, err := src.Fetch(ctx, 2, 1<<20, 0); !errors.Is(err, controller.ErrSnapshotNeeded) {
		t.Fatalf("fetch of a compacted offset: %v", err)
	}
	im := replayMetadata(t, ctx, src)
	_, want := vs[0].q.Committed()
	if len(im.Brokers()) != len(want.Brokers()) || len(im.Brokers()) != 12 {
		t.Fatalf("replayed %d brokers, the voter has %d", len(im.Brokers()), len(want.Brokers()))
	}
}

// What the controller listener does not serve gets Kafka's answer: a closed
// connection for an API it does not list, UNKNOWN_TOPIC_ID for a fetch of another
// topic, INCONSISTENT_CLUSTER_ID for another cluster; DescribeCluster lists the
// controllers; ApiVersions lists SamsaRaft.
func TestControllerListenerServesItsTableOnly(t *testing.T) {
	vs := startVoters(t, voterOptions{}, 1)
	dial := func() *rawConn {
		c, err := net.Dial("tcp", vs[0].addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return &rawConn{t: t, c: c}
	}
	rc := dial()
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "t", "1"
	keys := map[int16]bool{}
	for _, k := range rc.roundTrip(av).(*kmsg.ApiVersionsResponse).ApiKeys {
		keys[k.ApiKey] = true
	}
	for _, k := range []int16{1, 18, 55, 59, 60, 62, 63, 56, 67, peer.SamsaRaftKey} {
		if !keys[k] {
			t.Errorf("ApiVersions does not list %d", k)
		}
	}
	if keys[0] || keys[3] || keys[11] {
		t.Errorf("ApiVersions lists client APIs: %v", keys)
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 13
	fetch.Topics = []kmsg.FetchRequestTopic{{TopicID: [16]byte{9}, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}}}}
	if fr := rc.roundTrip(fetch).(*kmsg.FetchResponse); fr.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("fetch of another topic: %+v", fr.Topics[0].Partitions[0])
	}
	other := "other-cluster"
	fetch.ClusterID = &other
	if fr := rc.roundTrip(fetch).(*kmsg.FetchResponse); fr.ErrorCode != kerr.InconsistentClusterID.Code {
		t.Fatalf("fetch from another cluster: %d", fr.ErrorCode)
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.Version, dc.EndpointType = 1, 2
	eventually(t, 10*time.Second, "a leader", func() bool { id, _ := vs[0].q.Leader(); return id == 1 })
	if r := rc.roundTrip(dc).(*kmsg.DescribeClusterResponse); r.ErrorCode != 0 || r.ControllerID != 1 || len(r.Brokers) != 1 || r.Brokers[0].NodeID != 1 {
		t.Fatalf("describe controllers: %+v", r)
	}
	dc.EndpointType = 1
	if r := rc.roundTrip(dc).(*kmsg.DescribeClusterResponse); r.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Fatalf("describe brokers on the controller listener: %d", r.ErrorCode)
	}

	// A client API: the connection closes.
	produce := kmsg.NewPtrProduceRequest()
	produce.Version = 9
	rc.send(produce)
	rc.expectClosed()

	// A SamsaRaft body that is not a raft message: the connection closes.
	bad := dial()
	bad.send(&peer.SamsaRaftRequest{Message: []byte{0xff, 0xff, 0xff}})
	bad.expectClosed()

	// A raft message from a node that is not a voter is dropped, the connection kept.
	ok := dial()
	ok.send(&peer.SamsaRaftRequest{Message: marshalRaft(t, 41, 1)})
	if r := ok.roundTrip(av).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("after a stray raft message: %d", r.ErrorCode)
	}
}

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond) // polling a condition with a deadline
	}
}

// marshalRaft is a raft heartbeat from node from to node to.
func marshalRaft(t testing.TB, from, to int32) []byte {
	t.Helper()
	m := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: proto.Uint64(quorum.RaftID(from)), To: proto.Uint64(quorum.RaftID(to)), Term: proto.Uint64(1)}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// controllerSeedFrames returns a valid frame per controller-listener API at its min and
// max versions, and raft and metadata-fetch bodies.
func controllerSeedFrames(t testing.TB) [][]byte {
	var out [][]byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	for _, a := range controllerTable().served() {
		for _, v := range []int16{a.MinVersion, a.MaxVersion} {
			var req kmsg.Request
			if a.Key == peer.SamsaRaftKey {
				req = &peer.SamsaRaftRequest{Message: marshalRaft(t, 2, 1)}
			} else {
				req = kmsg.RequestForKey(a.Key)
				if d, ok := req.(interface{ Default() }); ok {
					d.Default()
				}
			}
			req.SetVersion(v)
			out = append(out, f.AppendRequest(nil, req, 7)[4:])
		}
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 13
	fetch.Topics = []kmsg.FetchRequestTopic{{TopicID: [16]byte(metadata.MetadataTopicID), Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 1, PartitionMaxBytes: 1 << 20}}}}
	fetch.MaxBytes = 1 << 20
	out = append(out, f.AppendRequest(nil, fetch, 7)[4:])
	snap := kmsg.NewPtrFetchSnapshotRequest()
	snap.Topics = []kmsg.FetchSnapshotRequestTopic{{Topic: peer.MetadataTopic, Partitions: []kmsg.FetchSnapshotRequestTopicPartition{{SnapshotID: kmsg.FetchSnapshotRequestTopicPartitionSnapshotID{EndOffset: -1, Epoch: -1}}}}}
	snap.MaxBytes = 1 << 20
	out = append(out, f.AppendRequest(nil, snap, 7)[4:])
	return out
}

// FuzzControllerRequest feeds arbitrary frames through the controller listener
// (header parse, the table's decoders, SamsaRaft's among them, the handlers) of a real
// quorum of one: nothing may panic and every request is answered (possibly by closing
// the connection), except a metadata Fetch, which may long-poll as long as it asks.
//
// Run it with: go test -run XXX -fuzz FuzzControllerRequest -fuzztime 5m ./net/kafka
func FuzzControllerRequest(f *testing.F) {
	for _, fr := range controllerSeedFrames(f) {
		f.Add(fr)
	}
	f.Add([]byte{0x27, 0x10, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0x0a, 0x02})
	f.Add([]byte{})
	vs := startVoters(f, voterOptions{snapshotEntries: 4}, 1)
	h := vs[0].h
	f.Fuzz(func(t *testing.T, frame []byte) {
		c := newFakeConn()
		h.Serve(transport.Request{Conn: c, Ticket: transport.NewTicket(c, 0), Frame: frame})
		if n := h.Panics(); n != 0 {
			t.Fatalf("handler panicked on %x", frame)
		}
		if len(frame) >= 2 && int16(frame[0])<<8|int16(frame[1]) == 1 {
			return // a metadata fetch may park
		}
		waitAnswered(t, c)
	})
}
