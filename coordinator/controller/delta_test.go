package controller

import (
	"slices"
	"testing"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/replication"
)

func tps(states []replication.PartitionState) []string {
	var out []string
	for _, s := range states {
		out = append(out, s.TP().String())
	}
	slices.Sort(out)
	return out
}

func stops(d replication.Delta) []string {
	var out []string
	for _, s := range d.Stopped {
		tag := ""
		if s.Delete {
			tag = "+delete"
		}
		out = append(out, s.TP.String()+tag)
	}
	slices.Sort(out)
	return out
}

func TestReplicaDelta(t *testing.T) {
	base := imageWith(t, brokers(1, 2, 3)...)
	im := withTopic(t, base, "a",
		testPartition{replicas: []int32{1, 2}, isr: []int32{1, 2}, leader: 1},
		testPartition{replicas: []int32{2, 1}, isr: []int32{2, 1}, leader: 2},
		testPartition{replicas: []int32{2, 3}, isr: []int32{2, 3}, leader: 2})
	im = mustApply(t, im, &metadata.ConfigRecord{Resource: metadata.ResourceTopic, Name: "a", Key: "min.insync.replicas", Value: metadata.StringPtr("2")},
		&metadata.ConfigRecord{Resource: metadata.ResourceTopic, Name: "a", Key: "retention.ms", Value: metadata.StringPtr("1234")})
	static := map[string]string{"log.segment.bytes": "1048576"}

	// From nothing: broker 1 leads a-0 and follows a-1; a-2 is not on it.
	d := ReplicaDelta(1, nil, im, static)
	if got := tps(d.Leaders); !slices.Equal(got, []string{"a-0"}) {
		t.Fatalf("leaders %v", got)
	}
	if got := tps(d.Followers); !slices.Equal(got, []string{"a-1"}) || len(d.Stopped) != 0 {
		t.Fatalf("followers %v stopped %v", got, d.Stopped)
	}
	l := d.Leaders[0]
	if l.MinISR != 2 || l.LogConfig.RetentionMs != 1234 || l.LogConfig.SegmentBytes != 1048576 || l.TopicID != topicID("a") || l.LeaderEpoch != 0 {
		t.Fatalf("leader state %+v", l)
	}
	if d := ReplicaDelta(1, im, im, static); len(d.Leaders)+len(d.Followers)+len(d.Stopped) != 0 {
		t.Fatalf("no change made %+v", d)
	}

	// Fencing 2 moves a-1's leadership to 1 and shrinks a-2's ISR (not on 1).
	fenced := mustApply(t, im, FenceBrokerRecords(im, 2, never)...)
	d = ReplicaDelta(1, im, fenced, static)
	if got := tps(d.Leaders); !slices.Equal(got, []string{"a-0", "a-1"}) || len(d.Followers) != 0 {
		t.Fatalf("after fencing 2: leaders %v followers %v", got, tps(d.Followers))
	}
	d3 := ReplicaDelta(3, im, fenced, static)
	if got := tps(d3.Leaders); !slices.Equal(got, []string{"a-2"}) || len(d3.Followers) != 0 {
		t.Fatalf("broker 3 takes a-2 over: leaders %v followers %v", got, tps(d3.Followers))
	}

	// A config change reaches every replica of the topic; a broker key of another
	// node reaches none.
	cfg := mustApply(t, im, &metadata.ConfigRecord{Resource: metadata.ResourceTopic, Name: "a", Key: "retention.ms", Value: metadata.StringPtr("99")})
	d = ReplicaDelta(1, im, cfg, static)
	if got := append(tps(d.Leaders), tps(d.Followers)...); len(got) != 2 || d.Leaders[0].LogConfig.RetentionMs != 99 {
		t.Fatalf("topic config change: %v", got)
	}
	other := mustApply(t, im, &metadata.ConfigRecord{Resource: metadata.ResourceBroker, Name: "2", Key: "log.retention.ms", Value: metadata.StringPtr("5")})
	if d := ReplicaDelta(1, im, other, static); len(d.Leaders)+len(d.Followers) != 0 {
		t.Fatalf("another node's config changed this node's replicas: %+v", d)
	}
	// min.insync.replicas through the cluster default, for a topic without it.
	im2 := withTopic(t, im, "b", testPartition{replicas: []int32{1}, isr: []int32{1}, leader: 1})
	def := mustApply(t, im2, &metadata.ConfigRecord{Resource: metadata.ResourceBroker, Name: "", Key: "min.insync.replicas", Value: metadata.StringPtr("3")})
	d = ReplicaDelta(1, im2, def, static)
	var bState *replication.PartitionState
	for i := range d.Leaders {
		if d.Leaders[i].Topic == "b" {
			bState = &d.Leaders[i]
		}
	}
	if bState == nil || bState.MinISR != 3 {
		t.Fatalf("cluster default min.insync.replicas: %+v", d.Leaders)
	}

	// Reassigned away from 1: stopped and deleted there.
	rec, err := reassignChange(im, topic(t, im, "a"), 1, []int32{2, 3}, true, never)
	if err != nil {
		t.Fatal(err)
	}
	moved := mustApply(t, im, rec)
	if p := part(t, moved, "a", 1); slices.Contains(p.Replicas, 1) {
		// Not complete yet (3 must join the ISR): 1 stays a replica until then.
		d = ReplicaDelta(1, im, moved, static)
		if got := tps(d.Followers); !slices.Contains(got, "a-1") {
			t.Fatalf("reassigning: %v", got)
		}
		p := part(t, moved, "a", 1)
		ch, code := alterPartitionChange(moved, topic(t, moved, "a"), 1, alterPartitionInput{brokerID: 2, leaderEpoch: p.LeaderEpoch,
			partitionEpoch: p.PartitionEpoch, isr: []isrMember{{2, -1}, {1, -1}, {3, -1}}, version: 2}, never)
		if code != nil {
			t.Fatal(code)
		}
		moved = mustApply(t, moved, ch)
	}
	d = ReplicaDelta(1, im, moved, static)
	if got := stops(d); !slices.Equal(got, []string{"a-1+delete"}) {
		t.Fatalf("reassigned away: stopped %v", got)
	}

	// Deleted: every replica here stops and deletes; re-created under the same name:
	// stopped (old id) and started (new id).
	gone := mustApply(t, im, &metadata.RemoveTopicRecord{ID: topicID("a")})
	if got := stops(ReplicaDelta(1, im, gone, static)); !slices.Equal(got, []string{"a-0+delete", "a-1+delete"}) {
		t.Fatalf("deleted: %v", got)
	}
	again := mustApply(t, gone, &metadata.TopicRecord{Name: "a", ID: topicID("a2")},
		&metadata.PartitionRecord{TopicID: topicID("a2"), Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
	d = ReplicaDelta(1, im, again, static)
	if got := stops(d); !slices.Equal(got, []string{"a-0+delete", "a-1+delete"}) || len(d.Leaders) != 1 || d.Leaders[0].TopicID != topicID("a2") {
		t.Fatalf("re-created: stopped %v leaders %+v", got, d.Leaders)
	}
}

// TestReplicaDeltaStrictMinISR: eligible.leader.replicas.version going to 1 (or back)
// reaches every replica here as StrictMinISR, the leader's HW rule.
func TestReplicaDeltaStrictMinISR(t *testing.T) {
	off := withTopic(t, elrImage(t, 0, brokers(1, 2)...), "a",
		testPartition{replicas: []int32{1, 2}, isr: []int32{1, 2}, leader: 1},
		testPartition{replicas: []int32{2, 1}, isr: []int32{2, 1}, leader: 2})
	if d := ReplicaDelta(1, nil, off, nil); len(d.Leaders) != 1 || d.Leaders[0].StrictMinISR || d.Followers[0].StrictMinISR {
		t.Fatalf("at level 0: %+v", d)
	}
	on := mustApply(t, off, &metadata.FeatureLevelRecord{Name: metadata.FeatureELRVersion, Level: 1})
	d := ReplicaDelta(1, off, on, nil)
	if len(d.Leaders) != 1 || len(d.Followers) != 1 || !d.Leaders[0].StrictMinISR || !d.Followers[0].StrictMinISR {
		t.Fatalf("to level 1: %+v", d)
	}
	if d := ReplicaDelta(1, on, off, nil); len(d.Leaders) != 1 || d.Leaders[0].StrictMinISR {
		t.Fatalf("back to level 0: %+v", d)
	}
}
