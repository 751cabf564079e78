package kafka

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeTopicPartitionsELR: a cluster at eligible.leader.replicas.version 1 (an
// UpdateFeatures through a broker), a topic on brokers 1-3 with
// min.insync.replicas=2, its replicas stopped one by one, described over TCP by
// broker 4: the replica that left an ISR below min.insync.replicas is an eligible
// leader replica; when the last ISR member stops too the ISR empties, both are
// eligible and the last leader is the last known ELR. Metadata reports the ISR only.
func TestDescribeTopicPartitionsELR(t *testing.T) {
	c := startCluster(t, nil)
	voters := map[int32]string{}
	for _, v := range c.voters {
		voters[v.id] = v.addr
	}
	fourth := startClusterBroker(t, 4, voters, nil)
	ctx := testCtx(t)
	cl := clusterClient(t, c)

	up := kmsg.NewPtrUpdateFeaturesRequest()
	fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = "eligible.leader.replicas.version", 1, 1
	up.FeatureUpdates = append(up.FeatureUpdates, fu)
	if r, err := up.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("UpdateFeatures: %v %+v", err, r)
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "elr", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Replicas = []int32{1, 2, 3}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	mi := kmsg.NewCreateTopicsRequestTopicConfig()
	mi.Name, mi.Value = "min.insync.replicas", kmsg.StringPtr("2")
	rt.Configs = append(rt.Configs, mi)
	create.Topics = append(create.Topics, rt)
	if r, err := create.RequestWith(ctx, cl); err != nil || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v %+v", err, r)
	}

	describe := func() kmsg.DescribeTopicPartitionsResponseTopicPartition {
		t.Helper()
		conn, err := net.Dial("tcp", fourth.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		rc := &rawConn{t: t, c: conn}
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		rq := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rq.Topic = "elr"
		req.Topics = append(req.Topics, rq)
		resp := rc.roundTrip(req).(*kmsg.DescribeTopicPartitionsResponse)
		if len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == kerr.UnknownTopicOrPartition.Code {
			// The fourth broker's image may not show the topic yet (CreateTopics waited
			// for the image of the broker it was sent to): no partition to match.
			return kmsg.DescribeTopicPartitionsResponseTopicPartition{LeaderID: -2}
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("describe: %+v", resp)
		}
		return resp.Topics[0].Partitions[0]
	}
	await := func(what string, leader int32, isr, elr, lastKnown []int32) {
		t.Helper()
		var p kmsg.DescribeTopicPartitionsResponseTopicPartition
		eventually(t, 15*time.Second, what, func() bool {
			p = describe()
			return p.LeaderID == leader && slices.Equal(p.ISR, isr) && slices.Equal(p.EligibleLeaderReplicas, elr) &&
				slices.Equal(p.LastKnownELR, lastKnown)
		})
		if p.ErrorCode != 0 && leader >= 0 {
			t.Fatalf("%s: %v", what, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	await("all in sync", 1, []int32{1, 2, 3}, []int32{}, []int32{})
	byID := map[int32]*clusterBroker{}
	for _, b := range c.brokers {
		byID[b.id] = b
	}
	// 3 stops: the ISR is still at min.insync.replicas, 3 is not eligible.
	byID[3].stop()
	await("3 out", 1, []int32{1, 2}, []int32{}, []int32{})
	// 2 stops: the ISR falls below it; 2 holds every committed record.
	byID[2].stop()
	await("2 eligible", 1, []int32{1}, []int32{2}, []int32{})
	md := metadataOf(t, fourth.addr, "elr")
	if mp := md.Topics[0].Partitions[0]; !slices.Equal(mp.ISR, []int32{1}) || mp.Leader != 1 {
		t.Fatalf("Metadata: %+v", mp)
	}
	// 1, the leader, stops: no leader, the ISR empty, 1 and 2 eligible, 1 the last
	// known leader.
	byID[1].stop()
	await("1 eligible and the last known leader", -1, []int32{}, []int32{1, 2}, []int32{1})
	md = metadataOf(t, fourth.addr, "elr")
	if mp := md.Topics[0].Partitions[0]; len(mp.ISR) != 0 || mp.Leader != -1 {
		t.Fatalf("Metadata after the last ISR member stopped: %+v", mp)
	}
}
