package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/peer"
	"github.com/samsa-broker/samsa/net/transport"
)

// clusterBroker is one broker of an in-process cluster, wired as a node's broker role
// is: a metadata follower over net/peer's MetadataSource, a broker lifecycle over its
// ControllerChannel, the Kafka broker over both, its replica fetchers over net/peer,
// served on a real listener.
type clusterBroker struct {
	id        int32
	addr      string
	eng       *engine.Manager
	cl        *peer.Client
	follower  *controller.MetadataFollower
	lifecycle *controller.BrokerLifecycle
	a         TestAssembly // the broker, assembled by net/broker
	b         *Broker      // its protocol adapter
	tr        transport.Transport
	stop      func()
}

// testCluster is three combined nodes: voters 1-3 and brokers 1-3.
type testCluster struct {
	voters  []*testVoter
	brokers []*clusterBroker
}

func (c *testCluster) bootstrap() []string {
	var out []string
	for _, b := range c.brokers {
		out = append(out, b.addr)
	}
	return out
}

func startCluster(t *testing.T, static map[string]string) *testCluster {
	t.Helper()
	vo := voterOptions{sessionTimeout: 3 * time.Second}
	if v, ok := static[configs.RemoteStorageSystemKey]; ok {
		// The controllers validate remote.storage.enable by their own setting, as
		// Kafka's ControllerConfigurationValidator does.
		vo.static = map[string]string{configs.RemoteStorageSystemKey: v}
	}
	c := &testCluster{voters: startVoters(t, vo, 1, 2, 3)}
	voterAddrs := map[int32]string{}
	for _, v := range c.voters {
		voterAddrs[v.id] = v.addr
	}
	for _, id := range []int32{1, 2, 3} {
		c.brokers = append(c.brokers, startClusterBroker(t, id, voterAddrs, static))
	}
	for _, b := range c.brokers {
		if !b.lifecycle.WaitState(testCtx(t), controller.StateRunning) {
			t.Fatalf("broker %d never unfenced", b.id)
		}
	}
	// RUNNING is the controller's word; the brokers answer from their images, which
	// show the unfencing a moment later.
	for _, b := range c.brokers {
		eventually(t, 10*time.Second, fmt.Sprintf("broker %d's image to show three unfenced brokers", b.id), func() bool {
			_, im := b.b.Image()
			return len(im.UnfencedBrokers()) == 3
		})
	}
	return c
}

func startClusterBroker(t *testing.T, id int32, voters map[int32]string, static map[string]string) *clusterBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cb := &clusterBroker{id: id, addr: ln.Addr().String()}
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	if cb.eng, err = engine.Open(engine.Options{Dirs: []string{filepath.Join(t.TempDir(), "logs")}, Sync: engine.SyncNone,
		DefaultConfig: configs.DefaultTopicLogConfig(static), Logger: testLogger(t)}); err != nil {
		t.Fatal(err)
	}
	cb.follower = controller.NewMetadataFollower(controller.FollowerConfig{Wait: 200 * time.Millisecond, Backoff: 20 * time.Millisecond, Logger: testLogger(t)})
	if cb.cl, err = peer.New(peer.Config{NodeID: id, ClusterID: "test-cluster", Voters: voters, Logger: testLogger(t),
		BrokerAddr:       peer.ImageBrokerAddrs(func() *metadata.Image { _, im := cb.follower.Image(); return im }, "PLAINTEXT"),
		ReconnectBackoff: 5 * time.Millisecond, ReconnectBackoffMax: 50 * time.Millisecond, RetryBackoff: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if cb.lifecycle, err = controller.NewBrokerLifecycle(controller.LifecycleConfig{NodeID: id, ClusterID: "test-cluster",
		Listeners:         []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: port, SecurityProtocol: metadata.ProtocolPlaintext}},
		HeartbeatInterval: 50 * time.Millisecond, RequestTimeout: 2 * time.Second, RetryBackoff: 20 * time.Millisecond, Logger: testLogger(t)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); cb.follower.Run(ctx, cb.cl.MetadataSource()) }()
	var mu sync.Mutex // the broker's and the lifecycle's deliveries, in order
	cb.follower.Subscribe(func(off uint64, old, im *metadata.Image) {
		mu.Lock()
		defer mu.Unlock()
		if cb.a != nil {
			cb.a.MetadataChanged(off, old, im)
		}
		cb.lifecycle.MetadataApplied(off, im)
	})
	go func() { defer wg.Done(); cb.lifecycle.Run(ctx, cb.cl.ControllerChannel()) }()
	mu.Lock()
	cb.a, err = assemble(Config{NodeID: id, ClusterID: "test-cluster", Host: "127.0.0.1", Port: port, Static: static},
		TestNodeDeps{Engine: cb.eng, Metadata: cb.follower, Controller: cb.cl.ControllerChannel(), ControllerID: func() int32 { l, _ := cb.follower.Leader(); return l },
			Fetch: cb.cl.FetchClient, Peer: func(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
				return cb.cl.Request(ctx, peer.Broker(broker), peer.PurposeTxn, req)
			}}, testLogger(t))
	if err == nil {
		cb.b = cb.a.Kafka()
		off, im := cb.follower.Image()
		cb.a.MetadataChanged(off, nil, im)
	}
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	cb.tr = transport.NewStd(transport.Config{}, cb.b, testLogger(t))
	served := make(chan struct{})
	go func() { cb.tr.Serve(ln); close(served) }()
	var once sync.Once
	cb.stop = func() {
		once.Do(func() {
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			cb.tr.Shutdown(sctx)
			scancel()
			<-served
			mu.Lock()
			cb.a.CloseDataPath()
			cb.a.Close()
			mu.Unlock()
			cancel()
			wg.Wait()
			cb.cl.Close()
			if n := cb.b.panics.Load(); n != 0 {
				t.Errorf("broker %d: %d handler panics", id, n)
			}
			cb.eng.Close()
		})
	}
	t.Cleanup(cb.stop)
	return cb
}

func clusterClient(t *testing.T, c *testCluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.bootstrap()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// metadataOf asks one broker for the metadata of topic.
func metadataOf(t *testing.T, addr, topic string) *kmsg.MetadataResponse {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	rc := &rawConn{t: t, c: c}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	return rc.roundTrip(req).(*kmsg.MetadataResponse)
}

// Three combined nodes: a topic created through any broker with replication factor 3
// is described alike by every broker (all three brokers, each partition's leader,
// replicas and ISR), admin requests reach the controller from any broker,
// DescribeCluster names the controller, DescribeQuorum the quorum, and records
// produced with acks=all are consumed back.
func TestClusterRoutingAndAdmin(t *testing.T) {
	c := startCluster(t, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	ctx := testCtx(t)
	// Through broker 3's listener only.
	// kadm answers BrokerMetadata from kgo's metadata cache (MetadataMinAge, 5 s by
	// default), which may predate the last broker's unfencing: kept short, so the
	// answer is the brokers' current one.
	adm := kadm.NewClient(func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers[2].addr), kgo.MetadataMinAge(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}())
	if r, err := adm.CreateTopic(ctx, 6, 3, nil, "replicated"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	var ref *kmsg.MetadataResponse
	for _, b := range c.brokers {
		// Every broker's image has the topic soon (a loaded machine may take seconds).
		var m *kmsg.MetadataResponse
		eventually(t, 10*time.Second, fmt.Sprintf("broker %d to know the topic", b.id), func() bool {
			m = metadataOf(t, b.addr, "replicated")
			return m.Topics[0].ErrorCode == 0
		})
		if len(m.Brokers) != 3 {
			t.Fatalf("broker %d lists %d brokers", b.id, len(m.Brokers))
		}
		tm := m.Topics[0]
		if tm.ErrorCode != 0 || len(tm.Partitions) != 6 {
			t.Fatalf("broker %d: %+v", b.id, tm)
		}
		for _, p := range tm.Partitions {
			if len(p.Replicas) != 3 || len(p.ISR) != 3 || !slices.Contains(p.Replicas, p.Leader) || len(p.OfflineReplicas) != 0 {
				t.Fatalf("broker %d partition %+v", b.id, p)
			}
		}
		if ref == nil {
			ref = m
			continue
		}
		for i, p := range tm.Partitions {
			rp := ref.Topics[0].Partitions[i]
			if p.Leader != rp.Leader || p.LeaderEpoch != rp.LeaderEpoch || !slices.Equal(p.Replicas, rp.Replicas) {
				t.Fatalf("broker %d disagrees on partition %d: %+v vs %+v", b.id, i, p, rp)
			}
		}
		if m.ControllerID != ref.ControllerID || m.ControllerID < 1 || m.ControllerID > 3 {
			t.Fatalf("controller %d vs %d", m.ControllerID, ref.ControllerID)
		}
	}
	bm, err := adm.BrokerMetadata(ctx)
	if err != nil || len(bm.Brokers) != 3 || bm.Controller != ref.ControllerID {
		t.Fatalf("describe cluster: %v %+v", err, bm)
	}
	// Leaders everywhere: produce with acks=all, consume back through the leaders.
	cl := clusterClient(t, c, kgo.DefaultProduceTopic("replicated"), kgo.RequiredAcks(kgo.AllISRAcks()))
	var recs []*kgo.Record
	for i := range 60 {
		recs = append(recs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i)), Partition: int32(i % 6)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce acks=all: %v", err)
	}
	cons := clusterClient(t, c, kgo.ConsumeTopics("replicated"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := 0
	for seen < 60 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		seen += fs.NumRecords()
	}
	// Configs and partitions through another broker; the change is visible at once.
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("123456")}}, "replicated"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreatePartitions(ctx, 2, "replicated"); err != nil {
		t.Fatal(err)
	}
	for _, b := range c.brokers {
		eventually(t, 10*time.Second, fmt.Sprintf("broker %d to see 8 partitions", b.id), func() bool {
			return len(metadataOf(t, b.addr, "replicated").Topics[0].Partitions) == 8
		})
	}
	// DescribeQuorum through a broker.
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: peer.MetadataTopic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	resp, err := dq.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions[0].CurrentVoters) != 3 {
		t.Fatalf("describe quorum: %v %+v", err, resp)
	}
	// ElectLeaders: every leader is already the preferred replica.
	el, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"replicated": {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range el {
		for p, r := range ps {
			if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				t.Fatalf("elect partition %d: %v", p, r.Err)
			}
		}
	}
	if _, err := adm.DeleteTopic(ctx, "replicated"); err != nil {
		t.Fatal(err)
	}
	for _, b := range c.brokers {
		eventually(t, 10*time.Second, fmt.Sprintf("broker %d to forget the topic", b.id), func() bool {
			return metadataOf(t, b.addr, "replicated").Topics[0].ErrorCode == kerr.UnknownTopicOrPartition.Code
		})
	}
}

// A consumer group's coordinator is the leader of its __consumer_offsets partition on
// every broker's say; when that broker dies the partition's leadership moves, the new
// leader loads the partition and the committed offsets are there.
func TestClusterCoordinatorFollowsLeadership(t *testing.T) {
	c := startCluster(t, map[string]string{"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"})
	ctx := testCtx(t)
	cl := clusterClient(t, c)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "t"); err != nil {
		t.Fatal(err)
	}
	const groupID = "g-follows"
	// Every broker names the same coordinator: the leader of the group's partition.
	var coord int32 = -1
	for _, b := range c.brokers {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version, fc.CoordinatorKey = 3, groupID
		conn, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		rc := &rawConn{t: t, c: conn}
		var resp *kmsg.FindCoordinatorResponse
		eventually(t, 10*time.Second, "a coordinator", func() bool {
			resp = rc.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
			return resp.ErrorCode == 0
		})
		if coord == -1 {
			coord = resp.NodeID
		} else if resp.NodeID != coord {
			t.Fatalf("broker %d names coordinator %d, another said %d", b.id, resp.NodeID, coord)
		}
	}
	_, im := c.brokers[0].follower.Image()
	ot, _ := im.Topic(group.OffsetsTopic)
	p := group.PartitionFor(groupID, int32(len(ot.Partitions)))
	if leader := ot.Partitions[p].Leader; leader != coord || len(ot.Partitions[p].Replicas) != 3 {
		t.Fatalf("coordinator %d, partition %d leader %d replicas %v", coord, p, leader, ot.Partitions[p].Replicas)
	}
	// Commit through the coordinator (acks=all on the replicated partition).
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 42, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, groupID, offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	// The coordinator's broker dies: its session expires, leadership moves.
	var dead *clusterBroker
	for _, b := range c.brokers {
		if b.id == coord {
			dead = b
		}
	}
	dead.stop()
	// Once the controller has fenced it, the live brokers name a new coordinator: the
	// partition's new leader, which loaded the partition from its replica.
	var live []string
	for _, b := range c.brokers {
		if b != dead {
			live = append(live, b.addr)
		}
	}
	conn, err := net.Dial("tcp", live[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	rc := &rawConn{t: t, c: conn}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, groupID
	var newCoord int32
	eventually(t, 10*time.Second, "a new coordinator", func() bool {
		r := rc.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
		newCoord = r.NodeID
		return r.ErrorCode == 0 && r.NodeID != coord
	})
	// The brokers apply the metadata log each on its own: until every live broker has
	// applied the fence, one may still name the dead coordinator, which another's
	// Metadata no longer lists (or which refuses the client's dial). kgo fails an
	// offset fetch whose coordinator lookup fails rather than retrying it, so every
	// live broker must name the new coordinator before a fresh client looks it up.
	// (Waiting for the new coordinator in every live broker's Metadata is not that:
	// it is a live broker, listed all along.)
	for _, addr := range live[1:] {
		fconn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer fconn.Close()
		fconn.SetDeadline(time.Now().Add(20 * time.Second))
		frc := &rawConn{t: t, c: fconn}
		eventually(t, 10*time.Second, "every live broker to name the new coordinator", func() bool {
			r := frc.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
			return r.ErrorCode == 0 && r.NodeID == newCoord
		})
	}
	cl2, err := kgo.NewClient(kgo.SeedBrokers(live...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	got, err := kadm.NewClient(cl2).FetchOffsets(ctx, groupID)
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch offsets from the new coordinator: %v %v", err, got.Error())
	}
	if o, ok := got.Lookup("t", 0); !ok || o.At != 42 {
		t.Fatalf("offsets after the coordinator died: %+v", got)
	}
	_, im = c.brokers[(int(coord) % 3)].follower.Image() // a live broker's image
	ot, _ = im.Topic(group.OffsetsTopic)
	if l := ot.Partitions[p].Leader; l == coord || l < 0 {
		t.Fatalf("partition %d still led by %d", p, l)
	}
}

// kcat -L against one broker of the cluster lists the three brokers and each
// partition's leader (skipped without kcat).
func TestClusterKcatMetadata(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed")
	}
	c := startCluster(t, nil)
	ctx := testCtx(t)
	if _, err := kadm.NewClient(clusterClient(t, c)).CreateTopic(ctx, 3, 3, nil, "listed"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, kcat, "-b", c.brokers[1].addr, "-L", "-t", "listed").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -L: %v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "3 brokers:") {
		t.Fatalf("kcat -L does not list 3 brokers:\n%s", s)
	}
	for _, b := range c.brokers {
		if !strings.Contains(s, fmt.Sprintf("broker %d at %s", b.id, b.addr)) {
			t.Fatalf("kcat -L misses broker %d at %s:\n%s", b.id, b.addr, s)
		}
	}
	if n := bytes.Count(out, []byte("leader ")); n != 3 {
		t.Fatalf("kcat -L shows %d partition leaders, want 3:\n%s", n, s)
	}
}
