package kafka

import (
	"errors"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-broker/samsa/coordinator/share"
)

// Three nodes: a share group acknowledges half of a partition's records, then the
// partition's leader dies. The new leader reads the share partition's state from the
// share coordinator (the leader of its __share_group_state partition, replicated with
// acks=all): a new consumer on the live brokers gets exactly the records not
// acknowledged, none acknowledged before the failover.
func TestClusterShareStateSurvivesLeaderLoss(t *testing.T) {
	static := shareStatic()
	static["offsets.topic.num.partitions"] = "3"
	static["share.coordinator.state.topic.num.partitions"] = "3"
	c := startCluster(t, static)
	ctx := testCtx(t)
	cl := clusterClient(t, c)
	// A loaded machine may see a broker fenced for a moment just after the start:
	// the creation is retried while fewer than three are unfenced.
	eventually(t, 15*time.Second, "the topic created with three replicas", func() bool {
		_, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, nil, "cs")
		if err != nil && !errors.Is(err, kerr.InvalidReplicationFactor) {
			t.Fatal(err)
		}
		return err == nil
	})
	const n = 40
	produceN(t, cl, "cs", 0, n)

	// ackHalf acknowledges the first half of the records in group g.
	ackHalf := func(g string) map[int64]bool {
		a := shareClient(t, c.bootstrap(), g, "cs", kgo.ShareMaxRecords(5), kgo.ShareMaxRecordsStrict())
		acked := map[int64]bool{}
		eventually(t, 20*time.Second, "half the records acknowledged in "+g, func() bool {
			for _, r := range pollShare(t, a, 300*time.Millisecond) {
				if len(acked) < n/2 {
					r.Ack(kgo.AckAccept)
					acked[r.Offset] = true
				} else {
					r.Ack(kgo.AckRelease)
				}
			}
			return len(acked) >= n/2
		})
		if err := a.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
		a.Close()
		return acked
	}
	groups := map[string]map[int64]bool{"csg": ackHalf("csg")}

	_, im := c.brokers[0].follower.Image()
	tp, _ := im.Topic("cs")
	leader := tp.Partitions[0].Leader
	st, _ := im.Topic(share.StateTopic)
	coordOf := func(g string) int32 {
		k := share.Key{Group: g, TopicID: [16]byte(tp.ID), Partition: 0}
		return st.Partitions[share.PartitionFor(k, int32(len(st.Partitions)))].Leader
	}
	// A second group whose share coordinator is another broker than the partition's
	// leader: its state goes over WriteShareGroupState.
	for i := 0; i < 100; i++ {
		if g := "csg-remote-" + strconv.Itoa(i); coordOf(g) != leader {
			groups[g] = ackHalf(g)
			break
		}
	}
	for g := range groups {
		t.Logf("group %s: partition leader %d, share coordinator %d", g, leader, coordOf(g))
	}
	var live []string
	for _, b := range c.brokers {
		if b.id == leader {
			b.stop()
			continue
		}
		live = append(live, b.addr)
	}

	for g, acked := range groups {
		b := shareClient(t, live, g, "cs")
		got := map[int64]bool{}
		eventually(t, 30*time.Second, "the unacknowledged records from the new leader in "+g, func() bool {
			for _, r := range pollShare(t, b, 300*time.Millisecond) {
				if acked[r.Offset] {
					t.Errorf("%s: offset %d acknowledged before the failover was delivered again", g, r.Offset)
				}
				r.Ack(kgo.AckAccept)
				got[r.Offset] = true
			}
			return len(got) >= n-len(acked)
		})
		all := maps.Clone(got)
		maps.Copy(all, acked)
		if len(all) != n {
			t.Fatalf("%s: %d distinct records delivered of %d", g, len(all), n)
		}
	}
}
