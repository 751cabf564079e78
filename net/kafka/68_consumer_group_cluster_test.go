package kafka

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
)

// TestClusterConsumerGroupFollowsLeadership: a consumer-protocol group (driven with
// raw ConsumerGroupHeartbeat requests, as Kafka's consumer sends them) on three nodes;
// its coordinator's broker dies, the new leader of the group's __consumer_offsets
// partition loads the group's records: the member keeps its id, epoch and assignment
// and heartbeats on at its epoch, and the offset it committed with its member epoch is
// there.
func TestClusterConsumerGroupFollowsLeadership(t *testing.T) {
	// replica.lag.time.max.ms at Kafka's default: a follower slowed by a loaded machine
	// must not leave the ISR of the group's partition before its leader dies (no
	// replica in sync would then be left to lead it).
	c := startCluster(t, map[string]string{"offsets.topic.num.partitions": "3", "group.consumer.heartbeat.interval.ms": "100", "replica.lag.time.max.ms": "30000"})
	ctx := testCtx(t)
	cl := clusterClient(t, c)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 4, 3, nil, "t848"); err != nil {
		t.Fatal(err)
	}
	const groupID, memberID = "g848-follows", "member-0000000000000a"
	try := func(cl *kgo.Client, epoch int32, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = groupID, memberID, epoch
		req.RebalanceTimeoutMillis = -1
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 30000
			req.SubscribedTopicNames = []string{"t848"}
		}
		req.Topics = owned
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return req.RequestWith(actx, cl)
	}
	heartbeat := func(cl *kgo.Client, epoch int32, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		resp, err := try(cl, epoch, owned)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var r *kmsg.ConsumerGroupHeartbeatResponse
	eventually(t, 10*time.Second, "the join", func() bool {
		r = heartbeat(cl, 0, []kmsg.ConsumerGroupHeartbeatRequestTopic{})
		return r.ErrorCode != kerr.CoordinatorLoadInProgress.Code && r.ErrorCode != kerr.CoordinatorNotAvailable.Code && r.ErrorCode != kerr.NotCoordinator.Code
	})
	if r.ErrorCode != 0 || r.MemberEpoch != 1 || r.Assignment == nil || len(r.Assignment.Topics) != 1 || len(r.Assignment.Topics[0].Partitions) != 4 {
		t.Fatalf("join: %+v", r)
	}
	owned := []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: r.Assignment.Topics[0].TopicID, Partitions: r.Assignment.Topics[0].Partitions}}
	if r = heartbeat(cl, 1, owned); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("heartbeat: %+v", r)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 9
	commit.Group, commit.MemberID, commit.Generation = groupID, memberID, 1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic, ct.TopicID = "t848", owned[0].TopicID // kgo may send v10, which names topics by id
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = 2, 77, -1
	ct.Partitions = []kmsg.OffsetCommitRequestTopicPartition{cp}
	commit.Topics = []kmsg.OffsetCommitRequestTopic{ct}
	cr, err := commit.RequestWith(ctx, cl)
	if err != nil || cr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit with the member epoch: %v %+v", err, cr)
	}

	_, im := c.brokers[0].follower.Image()
	ot, _ := im.Topic(group.OffsetsTopic)
	coord := ot.Partitions[group.PartitionFor(groupID, int32(len(ot.Partitions)))].Leader
	var live []string
	for _, b := range c.brokers {
		if b.id == coord {
			b.stop()
		} else {
			live = append(live, b.addr)
		}
	}
	cl2, err := kgo.NewClient(kgo.SeedBrokers(live...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	// The live brokers name the new coordinator once the dead one is fenced; the member
	// heartbeats on at its epoch there.
	conn, err := net.Dial("tcp", live[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	rc := &rawConn{t: t, c: conn}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, groupID
	var newCoord string
	for deadline := time.Now().Add(20 * time.Second); ; {
		r := rc.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
		newCoord = net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port)))
		if r.ErrorCode == 0 && r.NodeID != coord {
			break
		}
		if time.Now().After(deadline) {
			var live *clusterBroker
			for _, b := range c.brokers {
				if b.id != coord {
					live = b
				}
			}
			_, im := live.follower.Image()
			ot, _ := im.Topic(group.OffsetsTopic)
			pt := ot.Partitions[group.PartitionFor(groupID, int32(len(ot.Partitions)))]
			t.Fatalf("no new coordinator after broker %d stopped: FindCoordinator %+v; the group's partition in broker %d's image: leader %d, ISR %v, replicas %v",
				coord, r, live.id, pt.Leader, pt.ISR, pt.Replicas)
		}
		time.Sleep(2 * time.Millisecond) // polling a condition with a deadline
	}
	cconn, err := net.Dial("tcp", newCoord)
	if err != nil {
		t.Fatal(err)
	}
	defer cconn.Close()
	cconn.SetDeadline(time.Now().Add(30 * time.Second))
	crc := &rawConn{t: t, c: cconn}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version = 1
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis, hb.Topics = groupID, memberID, 1, -1, owned
	eventually(t, 20*time.Second, "the group loaded", func() bool {
		r = crc.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
		return r.ErrorCode != kerr.CoordinatorLoadInProgress.Code
	})
	if r.ErrorCode != 0 {
		t.Fatalf("heartbeat on the new coordinator: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r.MemberEpoch != 1 {
		t.Fatalf("heartbeat on the new coordinator: %+v", r)
	}
	d := describeConsumerGroup(t, cl2, groupID)
	if d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != memberID ||
		d.Members[0].MemberEpoch != 1 || len(d.Members[0].Assignment.TopicPartitions) != 1 || len(d.Members[0].Assignment.TopicPartitions[0].Partitions) != 4 {
		t.Fatalf("the group on the new coordinator: %+v", d)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 9
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group, fg.MemberID, fg.MemberEpoch = groupID, kmsg.StringPtr(memberID), 1
	fg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t848", TopicID: owned[0].TopicID, Partitions: []int32{2}}}
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{fg}
	fr, err := fetch.RequestWith(ctx, cl2)
	if err != nil || len(fr.Groups) != 1 || fr.Groups[0].ErrorCode != 0 || fr.Groups[0].Topics[0].Partitions[0].Offset != 77 {
		t.Fatalf("offset fetch with the member epoch on the new coordinator: %v %+v", err, fr)
	}
	// A stale epoch is refused, as Kafka 4 refuses it.
	fetch.Groups[0].MemberEpoch = 0
	if fr, err = fetch.RequestWith(ctx, cl2); err != nil || fr.Groups[0].ErrorCode != kerr.StaleMemberEpoch.Code {
		t.Fatalf("offset fetch with another epoch: %v %+v", err, fr)
	}
}

// TestClusterConsumerGroupFranzGoCoordinatorDies: two franz-go consumers on the
// consumer protocol on three nodes; the broker that coordinates their group dies while
// they consume; they find the new coordinator, keep their group, and every record is
// processed at least once (a record processed but not yet committed when the
// coordinator died may be processed again).
func TestClusterConsumerGroupFranzGoCoordinatorDies(t *testing.T) {
	c := startCluster(t, map[string]string{"offsets.topic.num.partitions": "3", "group.consumer.heartbeat.interval.ms": "100"})
	ctx := testCtx(t)
	cl := clusterClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const groupID, topic = "g848-franz", "t848-franz"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 6, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	recs := make(chan cgRecord, 4096)
	start := func(name string) *kgo.Client {
		k, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...),
			kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
			kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond), kgo.ClientID(name))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				fs := k.PollFetches(context.Background())
				if fs.IsClientClosed() {
					return
				}
				fs.EachRecord(func(r *kgo.Record) { recs <- cgRecord{by: name, value: string(r.Value)} })
				_ = k.CommitUncommittedOffsets(context.Background()) // a commit lost with the coordinator is retried by the next poll
				k.AllowRebalance()
			}
		}()
		t.Cleanup(func() { k.Close(); <-done })
		return k
	}
	atLeastOnce := func(seen map[string]int, from, to int) {
		t.Helper()
		timeout := time.NewTimer(45 * time.Second)
		defer timeout.Stop()
		for i := from; i < to; {
			if seen[strconv.Itoa(i)] > 0 {
				i++
				continue
			}
			select {
			case r := <-recs:
				seen[r.value]++
			case <-timeout.C:
				t.Fatalf("record %d never consumed", i)
			}
		}
	}
	seen := map[string]int{}
	start("x")
	start("y")
	produceValues(t, cl, topic, 0, 120)
	atLeastOnce(seen, 0, 120)

	_, im := c.brokers[0].follower.Image()
	ot, _ := im.Topic(group.OffsetsTopic)
	coord := ot.Partitions[group.PartitionFor(groupID, int32(len(ot.Partitions)))].Leader
	var liveAddrs []string
	for _, b := range c.brokers {
		if b.id == coord {
			b.stop()
		} else {
			liveAddrs = append(liveAddrs, b.addr)
		}
	}
	cl2, err := kgo.NewClient(kgo.SeedBrokers(liveAddrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	produceValues(t, cl2, topic, 120, 240)
	atLeastOnce(seen, 120, 240)
	for v, n := range seen {
		if n > 1 {
			t.Logf("record %s processed %d times (the coordinator's death)", v, n)
		}
	}
}
