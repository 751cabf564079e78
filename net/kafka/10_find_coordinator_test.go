package kafka

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/auth"
)

// coordinatorImages starts a single data broker whose first FindCoordinator of key
// created __consumer_offsets, and returns it, a connection to it, the request, the
// topic, key's partition and apply, which publishes the image with recs applied.
func coordinatorImages(t *testing.T, key string) (*testBroker, *rawConn, *kmsg.FindCoordinatorRequest, *metadata.TopicImage, int32, func(...metadata.Record)) {
	t.Helper()
	tb := startDataBroker(t)
	rc := tb.raw(t)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, key
	// The first lookup creates __consumer_offsets; this node leads it all.
	eventually(t, 10*time.Second, "this node coordinating "+key, func() bool {
		r := rc.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
		return r.ErrorCode == 0 && r.NodeID == 1
	})
	off, im := tb.b.Image()
	ot, ok := im.Topic(group.OffsetsTopic)
	if !ok {
		t.Fatal("no __consumer_offsets in the image")
	}
	apply := func(recs ...metadata.Record) {
		t.Helper()
		next, err := im.Apply(recs...)
		if err != nil {
			t.Fatal(err)
		}
		off++
		tb.a.MetadataChanged(off, im, next)
		im = next
	}
	return tb, rc, fc, ot, group.PartitionFor(key, int32(len(ot.Partitions))), apply
}

// TestFindCoordinatorListedInMetadata: through the images of a coordinator's
// fencing, the coordinator a broker names is one its own Metadata lists, from the
// same image. Before the fence it names the old coordinator (listed); with the
// broker fenced and the partition not yet moved (the fence record alone) it answers
// COORDINATOR_NOT_AVAILABLE; once the partition moved, the new leader. A client
// that mixes the first answer of one broker with the Metadata of another that
// applied the fence (brokers apply the metadata log each on its own) sees a
// coordinator the Metadata does not list: that is lag between brokers, as in
// Kafka, not an inconsistency of one broker's answers.
func TestFindCoordinatorListedInMetadata(t *testing.T) {
	_, rc, fc, ot, p, apply := coordinatorImages(t, "g-listed")
	epoch := int64(1000)
	// check asks FindCoordinator and Metadata of the broker's current image, and
	// that the coordinator named (if any) is one Metadata lists.
	check := func(what string, wantNode int32, wantCode int16, wantListed []int32) {
		t.Helper()
		r := rc.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
		md := rc.roundTrip(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
		var listed []int32
		for _, b := range md.Brokers {
			listed = append(listed, b.NodeID)
		}
		slices.Sort(listed)
		if !slices.Equal(listed, wantListed) {
			t.Fatalf("%s: Metadata lists %v, want %v", what, listed, wantListed)
		}
		if r.ErrorCode != wantCode || (wantCode == 0 && r.NodeID != wantNode) {
			t.Fatalf("%s: FindCoordinator node %d code %d, want node %d code %d", what, r.NodeID, r.ErrorCode, wantNode, wantCode)
		}
		if r.ErrorCode == 0 && !slices.Contains(listed, r.NodeID) {
			t.Fatalf("%s: coordinator %d is not in the same broker's Metadata %v", what, r.NodeID, listed)
		}
	}
	// Broker 2 joins and the group's partition moves to it: 2 coordinates.
	apply(&metadata.RegisterBrokerRecord{ID: 2, Epoch: epoch,
		Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.2", Port: 19092, SecurityProtocol: metadata.ProtocolPlaintext}}},
		&metadata.PartitionChangeRecord{TopicID: ot.ID, Partition: p, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: metadata.NoLeaderChange, LeaderRecoveryState: -1},
		&metadata.PartitionChangeRecord{TopicID: ot.ID, Partition: p, Leader: 2, LeaderRecoveryState: -1})
	check("broker 2 leads the partition", 2, 0, []int32{1, 2})
	// Broker 2 is fenced, its leadership not yet moved.
	apply(&metadata.BrokerRegistrationChangeRecord{ID: 2, Epoch: epoch, Fenced: metadata.FenceFence})
	check("broker 2 fenced, still the partition's leader", -1, kerr.CoordinatorNotAvailable.Code, []int32{1})
	// The partition moves back to this broker.
	apply(&metadata.PartitionChangeRecord{TopicID: ot.ID, Partition: p, ISR: []int32{1}, Leader: 1, LeaderRecoveryState: -1})
	check("the partition moved to broker 1", 1, 0, []int32{1})
}

// TestFindCoordinatorEndpointOfTheListener: the coordinator's address is its endpoint
// of the listener the request came in on, the one Metadata on that listener gives
// (a client of a second listener is not sent to the advertised one), and the
// advertised one on the broker's own listener.
func TestFindCoordinatorEndpointOfTheListener(t *testing.T) {
	tb, rc, fc, ot, p, apply := coordinatorImages(t, "g-endpoint")
	srv, err := auth.NewServer(auth.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewSecureListener(tb.b, ListenerSecurity{Name: "EXTERNAL", Protocol: auth.Plaintext, Auth: srv})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveStd(t, l, ln)
	ext, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Close()
	ext.SetDeadline(time.Now().Add(10 * time.Second))
	erc := &rawConn{t: t, c: ext}
	// Broker 2, with an endpoint on each listener, coordinates the group.
	apply(&metadata.RegisterBrokerRecord{ID: 2, Epoch: 1000, Endpoints: []metadata.Endpoint{
		{Name: "PLAINTEXT", Host: "127.0.0.2", Port: 19092, SecurityProtocol: metadata.ProtocolPlaintext},
		{Name: "EXTERNAL", Host: "127.0.0.3", Port: 29092, SecurityProtocol: metadata.ProtocolPlaintext}}},
		&metadata.PartitionChangeRecord{TopicID: ot.ID, Partition: p, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: metadata.NoLeaderChange, LeaderRecoveryState: -1},
		&metadata.PartitionChangeRecord{TopicID: ot.ID, Partition: p, Leader: 2, LeaderRecoveryState: -1})
	// Broker 2's endpoint as each listener's clients are told it.
	listeners := []struct {
		listener string
		rc       *rawConn
		host     string
		port     int32
	}{{"PLAINTEXT", rc, "127.0.0.2", 19092}, {"EXTERNAL", erc, "127.0.0.3", 29092}}
	for _, c := range listeners {
		r := c.rc.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
		if r.ErrorCode != 0 || r.NodeID != 2 || r.Host != c.host || r.Port != c.port {
			t.Fatalf("%s: FindCoordinator %d %s:%d code %d, want 2 %s:%d", c.listener, r.NodeID, r.Host, r.Port, r.ErrorCode, c.host, c.port)
		}
		md := c.rc.roundTrip(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
		i := slices.IndexFunc(md.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.NodeID == 2 })
		if i < 0 || md.Brokers[i].Host != r.Host || md.Brokers[i].Port != r.Port {
			t.Fatalf("%s: Metadata brokers %+v, FindCoordinator %s:%d", c.listener, md.Brokers, r.Host, r.Port)
		}
	}

	// A Produce to a partition broker 2 leads is told its leader's endpoint of the
	// same listener (KIP-951's NodeEndpoints), as Metadata gives it.
	id := metadata.NewUUID()
	apply(&metadata.TopicRecord{Name: "led-by-2", ID: id},
		&metadata.PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 1})
	for _, c := range listeners {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 10, -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "led-by-2"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 1, valueBytes: 10})
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.rc.roundTrip(req).(*kmsg.ProduceResponse)
		pr := resp.Topics[0].Partitions[0]
		if pr.ErrorCode != kerr.NotLeaderForPartition.Code || pr.CurrentLeader.LeaderID != 2 {
			t.Fatalf("%s: produce to broker 2's partition: code %d, leader %d", c.listener, pr.ErrorCode, pr.CurrentLeader.LeaderID)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 || resp.Brokers[0].Host != c.host || resp.Brokers[0].Port != c.port {
			t.Fatalf("%s: Produce's node endpoints %+v, want 2 at %s:%d", c.listener, resp.Brokers, c.host, c.port)
		}
	}
}
