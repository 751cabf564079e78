package controller

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func TestUsableBrokers(t *testing.T) {
	im := imageWith(t, testBroker{id: 3}, testBroker{id: 1, fenced: true}, testBroker{id: 2, shutdown: true}, testBroker{id: 0})
	var ids []int32
	for _, b := range UsableBrokers(im) {
		ids = append(ids, b.ID)
	}
	if !reflect.DeepEqual(ids, []int32{0, 3}) {
		t.Fatalf("usable = %v, want [0 3]", ids)
	}
}

func TestPlaceReplicas(t *testing.T) {
	racked := func(spec ...any) []metadata.BrokerImage {
		var out []metadata.BrokerImage
		for i := 0; i < len(spec); i += 2 {
			b := metadata.BrokerImage{ID: int32(spec[i].(int))}
			if r := spec[i+1].(string); r != "" {
				b.Rack = metadata.StringPtr(r)
			}
			out = append(out, b)
		}
		return out
	}
	plain := racked(3, "", 1, "", 2, "", 4, "")
	for _, tc := range []struct {
		name         string
		brokers      []metadata.BrokerImage
		first, count int32
		rf           int16
		start        int
		want         [][]int32
		err          *kerr.Error
	}{
		{name: "sorted, i+j mod n", brokers: plain, count: 4, rf: 3,
			want: [][]int32{{1, 2, 3}, {2, 3, 4}, {3, 4, 1}, {4, 1, 2}}},
		{name: "start index shifts", brokers: plain, count: 2, rf: 2, start: 2,
			want: [][]int32{{3, 4}, {4, 1}}},
		{name: "negative and large start", brokers: plain, count: 1, rf: 1, start: -1, want: [][]int32{{4}}},
		{name: "first partition index", brokers: plain, first: 5, count: 1, rf: 2, want: [][]int32{{2, 3}}},
		{name: "rf = n", brokers: plain, count: 1, rf: 4, want: [][]int32{{1, 2, 3, 4}}},
		{name: "rf above brokers", brokers: plain, count: 1, rf: 5, err: kerr.InvalidReplicationFactor},
		{name: "rf zero", brokers: plain, count: 1, rf: 0, err: kerr.InvalidReplicationFactor},
		{name: "no brokers", count: 1, rf: 1, err: kerr.InvalidReplicationFactor},
		{name: "no partitions", brokers: plain, count: 0, rf: 1, err: kerr.InvalidPartitions},
		// Racks a: 1, 2; b: 3, 4; c: 5, 6 → alternated 1(a) 3(b) 5(c) 2(a) 4(b) 6(c).
		{name: "racks alternate", brokers: racked(1, "a", 2, "a", 3, "b", 4, "b", 5, "c", 6, "c"), count: 3, rf: 3,
			want: [][]int32{{1, 3, 5}, {3, 5, 2}, {5, 2, 4}}},
		// Racks a: 1, 2, 3; b: 4 → alternated 1 4 2 3: a partition takes the other
		// rack first, then any broker.
		{name: "uneven racks: distinct racks first", brokers: racked(1, "a", 2, "a", 3, "a", 4, "b"), count: 4, rf: 3,
			want: [][]int32{{1, 4, 2}, {4, 2, 3}, {2, 4, 3}, {3, 4, 1}}},
		{name: "a broker without a rack is its own rack", brokers: racked(1, "a", 2, "a", 3, ""), count: 2, rf: 2,
			want: [][]int32{{3, 1}, {1, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlaceReplicas(tc.brokers, tc.first, tc.count, tc.rf, tc.start)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestPlaceReplicasRackSpread: with as many racks as replicas, no partition has two
// replicas on one rack, and leadership spreads evenly.
func TestPlaceReplicasRackSpread(t *testing.T) {
	var bs []metadata.BrokerImage
	rackOf := map[int32]string{}
	for i := int32(0); i < 9; i++ {
		r := string(rune('a' + i%3))
		bs = append(bs, metadata.BrokerImage{ID: i, Rack: metadata.StringPtr(r)})
		rackOf[i] = r
	}
	got, err := PlaceReplicas(bs, 0, 90, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	for i, reps := range got {
		seen := map[string]bool{}
		for _, id := range reps {
			if seen[rackOf[id]] {
				t.Fatalf("partition %d: %v puts two replicas on rack %s", i, reps, rackOf[id])
			}
			seen[rackOf[id]] = true
		}
		leaders[reps[0]]++
	}
	for id, n := range leaders {
		if n != 10 {
			t.Fatalf("broker %d leads %d partitions, want 10", id, n)
		}
	}
}

func TestValidateAssignment(t *testing.T) {
	im := imageWith(t, brokers(1, 2, 3)...)
	for _, tc := range []struct {
		name string
		a    [][]int32
		rf   int
		err  *kerr.Error
	}{
		{name: "ok", a: [][]int32{{1, 2}, {2, 3}}},
		{name: "no replicas", a: [][]int32{{}}, err: kerr.InvalidReplicaAssignment},
		{name: "duplicate", a: [][]int32{{1, 1}}, err: kerr.InvalidReplicaAssignment},
		{name: "unknown broker", a: [][]int32{{1, 9}}, err: kerr.InvalidReplicaAssignment},
		{name: "inconsistent replication factors", a: [][]int32{{1, 2}, {3}}, err: kerr.InvalidReplicaAssignment},
		{name: "wanted replication factor", a: [][]int32{{1, 2}}, rf: 3, err: kerr.InvalidReplicaAssignment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateAssignment(im, tc.a, 0, tc.rf)
			if (tc.err == nil) != (err == nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
		})
	}
}

func TestNewPartitionRecords(t *testing.T) {
	im := imageWith(t, testBroker{id: 1, fenced: true}, testBroker{id: 2}, testBroker{id: 3, shutdown: true})
	id := topicID("t")
	im = mustApply(t, im, &metadata.TopicRecord{Name: "t", ID: id})
	recs, err := NewPartitionRecords(im, id, 0, [][]int32{{1, 2, 3}, {2}})
	if err != nil {
		t.Fatal(err)
	}
	p0 := recs[0].(*metadata.PartitionRecord)
	if !reflect.DeepEqual(p0.ISR, []int32{2}) || p0.Leader != 2 || !reflect.DeepEqual(p0.Replicas, []int32{1, 2, 3}) {
		t.Fatalf("partition 0 = %+v: want ISR [2] led by 2", p0)
	}
	mustApply(t, im, recs...)
	if _, err := NewPartitionRecords(im, id, 0, [][]int32{{1, 3}}); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Fatalf("all replicas unusable: err = %v", err)
	}
}

// TestElection covers the leader choice of partitionChange.
func TestElection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		brokers  []testBroker
		p        testPartition
		isr      []int32 // target ISR (nil: unchanged)
		mode     electionMode
		leader   int32
		wantISR  []int32
		recovery int8
	}{
		{name: "valid leader kept", brokers: brokers(1, 2, 3), p: testPartition{replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, leader: 2},
			leader: 2, wantISR: []int32{1, 2, 3}},
		{name: "preferred when asked", brokers: brokers(1, 2, 3), p: testPartition{replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, leader: 2},
			mode: electPreferred, leader: 1, wantISR: []int32{1, 2, 3}},
		{name: "preferred not in ISR: keep", brokers: brokers(1, 2, 3), p: testPartition{replicas: []int32{1, 2, 3}, isr: []int32{2, 3}, leader: 2},
			mode: electPreferred, leader: 2, wantISR: []int32{2, 3}},
		{name: "leader leaves ISR: preferred replica first", brokers: brokers(1, 2, 3), p: testPartition{replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, leader: 3},
			isr: []int32{1, 2}, leader: 1, wantISR: []int32{1, 2}},
		{name: "preferred fenced: next ISR member", brokers: []testBroker{{id: 1, fenced: true}, {id: 2}, {id: 3}},
			p: testPartition{replicas: []int32{1, 2, 3}, isr: []int32{1, 3}, leader: 1}, leader: 3, wantISR: []int32{1, 3}},
		{name: "preferred shutting down: next", brokers: []testBroker{{id: 1, shutdown: true}, {id: 2}, {id: 3}},
			p: testPartition{replicas: []int32{1, 2, 3}, isr: []int32{1, 2}, leader: 1}, leader: 2, wantISR: []int32{1, 2}},
		{name: "never outside the ISR", brokers: []testBroker{{id: 1, fenced: true}, {id: 2}, {id: 3}},
			p: testPartition{replicas: []int32{1, 2, 3}, isr: []int32{1}, leader: 1}, leader: -1, wantISR: []int32{1}},
		{name: "unclean: first live replica, ISR of one, recovering", brokers: []testBroker{{id: 1, fenced: true}, {id: 2, fenced: true}, {id: 3}},
			p: testPartition{replicas: []int32{1, 2, 3}, isr: []int32{1}, leader: 1}, mode: electUnclean, leader: 3, wantISR: []int32{3}, recovery: metadata.LeaderRecovering},
		{name: "unclean prefers the ISR", brokers: []testBroker{{id: 1, fenced: true}, {id: 2}, {id: 3}},
			p: testPartition{replicas: []int32{1, 2, 3}, isr: []int32{1, 3}, leader: 1}, mode: electUnclean, leader: 3, wantISR: []int32{1, 3}},
		{name: "unclean with nobody alive", brokers: []testBroker{{id: 1, fenced: true}, {id: 2, fenced: true}},
			p: testPartition{replicas: []int32{1, 2}, isr: []int32{1}, leader: 1}, mode: electUnclean, leader: -1, wantISR: []int32{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := withTopic(t, imageWith(t, tc.brokers...), "t", tc.p)
			c := newChange(im, topic(t, im, "t"), 0, tc.mode, nil)
			c.isr = tc.isr
			r := c.compute()
			if r.leader != tc.leader || !reflect.DeepEqual(r.isr, tc.wantISR) || r.recovery != tc.recovery {
				t.Fatalf("leader %d isr %v recovery %d; want %d %v %d", r.leader, r.isr, r.recovery, tc.leader, tc.wantISR, tc.recovery)
			}
			if rec := c.build(); rec != nil {
				mustApply(t, im, rec)
			}
		})
	}
}

func TestPartitionChangeRecordsOnlyDifferences(t *testing.T) {
	im := withTopic(t, imageWith(t, brokers(1, 2)...), "t", testPartition{replicas: []int32{1, 2}, isr: []int32{1, 2}, leader: 1})
	if rec := newChange(im, topic(t, im, "t"), 0, electKeep, nil).build(); rec != nil {
		t.Fatalf("no-op change built %+v", rec)
	}
	c := newChange(im, topic(t, im, "t"), 0, electKeep, nil)
	c.isr = []int32{1}
	rec := c.build()
	if rec == nil || !reflect.DeepEqual(rec.ISR, []int32{1}) || rec.Leader != metadata.NoLeaderChange || rec.Replicas != nil || rec.LeaderRecoveryState != -1 {
		t.Fatalf("ISR shrink = %+v", rec)
	}
	next := mustApply(t, im, rec)
	if p := part(t, next, "t", 0); p.PartitionEpoch != 1 || p.LeaderEpoch != 0 {
		t.Fatalf("epochs after an ISR change: %+v", p)
	}
}

// fenceImage: brokers 1-3; "a" p0 led by 1 ISR {1,2,3}; p1 led by 2 ISR {2,1};
// p2 led by 1 ISR {1} (last member); p3 led by 3, 1 not in the ISR.
func fenceImage(t *testing.T) *metadata.Image {
	return withTopic(t, imageWith(t, brokers(1, 2, 3)...), "a",
		testPartition{replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, leader: 1},
		testPartition{replicas: []int32{2, 1}, isr: []int32{2, 1}, leader: 2},
		testPartition{replicas: []int32{1, 3}, isr: []int32{1}, leader: 1},
		testPartition{replicas: []int32{3, 1}, isr: []int32{3}, leader: 3})
}

// TestFenceBrokerReturned: a fence's elections from the ISR pass over replicas
// back from a restart for one that is not, and among replicas that are all back,
// take the one back the longest; a replica back is still elected when it is the
// only one that may lead.
func TestFenceBrokerReturned(t *testing.T) {
	im := withTopic(t, imageWith(t, brokers(1, 2, 3, 4)...), "a",
		testPartition{replicas: []int32{1, 2, 3, 4}, isr: []int32{1, 2, 3, 4}, leader: 1},
		testPartition{replicas: []int32{1, 2}, isr: []int32{1, 2}, leader: 1})
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name   string
		back   map[int32]time.Time
		p0, p1 int32
	}{
		{"none back", nil, 2, 2},
		{"2 back", map[int32]time.Time{2: t0}, 3, 2},
		{"2 and 3 back", map[int32]time.Time{2: t0, 3: t0.Add(-time.Second)}, 4, 2},
		{"all back", map[int32]time.Time{2: t0, 3: t0.Add(-time.Second), 4: t0.Add(time.Second)}, 3, 2},
	} {
		var returned func(int32) time.Time
		if tc.back != nil {
			returned = func(id int32) time.Time { return tc.back[id] }
		}
		next := mustApply(t, im, FenceBrokerRecordsReturned(im, 1, never, returned)...)
		if p0, p1 := part(t, next, "a", 0), part(t, next, "a", 1); p0.Leader != tc.p0 || p1.Leader != tc.p1 {
			t.Errorf("%s: leaders %d and %d, want %d and %d", tc.name, p0.Leader, p1.Leader, tc.p0, tc.p1)
		}
	}
}

func TestFenceBroker(t *testing.T) {
	im := fenceImage(t)
	recs := FenceBrokerRecords(im, 1, never)
	if len(recs) != 4 { // the fence + p0, p1, p2
		t.Fatalf("records = %d: %+v", len(recs), recs)
	}
	next := mustApply(t, im, recs...)
	if b, _ := next.Broker(1); !b.Fenced {
		t.Fatal("broker 1 not fenced")
	}
	want := []struct {
		leader int32
		isr    []int32
		epoch  int32
	}{{2, []int32{2, 3}, 1}, {2, []int32{2}, 0}, {-1, []int32{1}, 1}, {3, []int32{3}, 0}}
	for i, w := range want {
		p := part(t, next, "a", i)
		if p.Leader != w.leader || !reflect.DeepEqual(p.ISR, w.isr) || p.LeaderEpoch != w.epoch {
			t.Errorf("p%d = leader %d isr %v epoch %d; want %d %v %d", i, p.Leader, p.ISR, p.LeaderEpoch, w.leader, w.isr, w.epoch)
		}
	}
	if LeadsAny(next, 1) {
		t.Fatal("a fenced broker leads")
	}
	if FenceBrokerRecords(next, 1, never) != nil || FenceBrokerRecords(next, 9, never) != nil {
		t.Fatal("fencing a fenced or unknown broker made records")
	}
	// Unclean: the last-member partition elects 3, recovering.
	next = mustApply(t, im, FenceBrokerRecords(im, 1, always)...)
	if p := part(t, next, "a", 2); p.Leader != 3 || !reflect.DeepEqual(p.ISR, []int32{3}) || p.LeaderRecoveryState != metadata.LeaderRecovering {
		t.Fatalf("unclean p2 = %+v", p)
	}
	// Unfencing 1 makes it lead p2 again (the last ISR member returns).
	fenced := mustApply(t, im, FenceBrokerRecords(im, 1, never)...)
	back := mustApply(t, fenced, UnfenceBrokerRecords(fenced, 1, never)...)
	if p := part(t, back, "a", 2); p.Leader != 1 || p.LeaderEpoch != 2 {
		t.Fatalf("after unfence p2 = %+v", p)
	}
	if p := part(t, back, "a", 0); p.Leader != 2 {
		t.Fatalf("unfence moved a led partition: %+v", p)
	}
}

func TestControlledShutdownRecords(t *testing.T) {
	im := fenceImage(t)
	recs := ControlledShutdownRecords(im, 1, never)
	next := mustApply(t, im, recs...)
	if b, _ := next.Broker(1); !b.InControlledShutdown || b.Fenced {
		t.Fatalf("broker 1 = %+v", b)
	}
	if p := part(t, next, "a", 0); p.Leader != 2 || slices.Contains(p.ISR, 1) {
		t.Fatalf("p0 = %+v", p)
	}
	if p := part(t, next, "a", 2); p.Leader != -1 || !reflect.DeepEqual(p.ISR, []int32{1}) {
		t.Fatalf("p2 (only replica in sync shuts down) = %+v", p)
	}
	if LeadsAny(next, 1) {
		t.Fatal("broker in controlled shutdown still leads")
	}
	if ControlledShutdownRecords(next, 1, never) != nil {
		t.Fatal("second controlled shutdown made records")
	}
}

func TestReregistrationFences(t *testing.T) {
	im := fenceImage(t)
	reg := &metadata.RegisterBrokerRecord{ID: 1, Epoch: 10, Fenced: true, Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}}
	next := mustApply(t, im, RegisterBrokerRecords(im, reg, never, false)...)
	if LeadsAny(next, 1) {
		t.Fatal("re-registered (fenced) broker still leads")
	}
	if p := part(t, next, "a", 1); !reflect.DeepEqual(p.ISR, []int32{2}) {
		t.Fatalf("p1 = %+v", p)
	}
	fresh := &metadata.RegisterBrokerRecord{ID: 7, Epoch: 11, Fenced: true, Endpoints: reg.Endpoints}
	if recs := RegisterBrokerRecords(next, fresh, never, false); len(recs) != 1 {
		t.Fatalf("a new broker's registration: %d records", len(recs))
	}
}

func TestAlterPartitionValidation(t *testing.T) {
	base := imageWith(t, testBroker{id: 1}, testBroker{id: 2}, testBroker{id: 3, fenced: true}, testBroker{id: 4, shutdown: true}, testBroker{id: 5})
	im := withTopic(t, base, "t", testPartition{replicas: []int32{1, 2, 3, 4}, isr: []int32{1, 2}, leader: 1})
	// Bump the epochs: leader epoch 1 (leader 2 then back to 1 would be 2; use one change).
	im = mustApply(t, im, &metadata.PartitionChangeRecord{TopicID: topicID("t"), Partition: 0, Leader: metadata.NoLeaderChange, LeaderRecoveryState: -1, ISR: []int32{1, 2}})
	// Now leader epoch 0, partition epoch 1.
	members := func(ids ...int32) []isrMember {
		out := make([]isrMember, len(ids))
		for i, id := range ids {
			out[i] = isrMember{id: id, epoch: -1}
		}
		return out
	}
	ok := alterPartitionInput{brokerID: 1, leaderEpoch: 0, partitionEpoch: 1, isr: members(1), version: 2}
	for _, tc := range []struct {
		name string
		mod  func(*alterPartitionInput)
		err  *kerr.Error
		isr  []int32
	}{
		{name: "shrink", isr: []int32{1}},
		{name: "no change", mod: func(in *alterPartitionInput) { in.isr = members(1, 2) }},
		{name: "leader epoch ahead", mod: func(in *alterPartitionInput) { in.leaderEpoch = 1 }, err: kerr.NotController},
		{name: "leader epoch behind", mod: func(in *alterPartitionInput) { in.leaderEpoch = -1 }, err: kerr.FencedLeaderEpoch},
		{name: "not the leader", mod: func(in *alterPartitionInput) { in.brokerID = 2 }, err: kerr.InvalidRequest},
		{name: "partition epoch ahead", mod: func(in *alterPartitionInput) { in.partitionEpoch = 2 }, err: kerr.NotController},
		{name: "partition epoch behind", mod: func(in *alterPartitionInput) { in.partitionEpoch = 0 }, err: kerr.InvalidUpdateVersion},
		{name: "leader left out", mod: func(in *alterPartitionInput) { in.isr = members(2) }, err: kerr.InvalidRequest},
		{name: "not a replica", mod: func(in *alterPartitionInput) { in.isr = members(1, 5) }, err: kerr.InvalidRequest},
		{name: "duplicate", mod: func(in *alterPartitionInput) { in.isr = members(1, 1) }, err: kerr.InvalidRequest},
		{name: "empty", mod: func(in *alterPartitionInput) { in.isr = nil }, err: kerr.InvalidRequest},
		{name: "fenced member", mod: func(in *alterPartitionInput) { in.isr = members(1, 3) }, err: kerr.IneligibleReplica},
		{name: "shutting-down member", mod: func(in *alterPartitionInput) { in.isr = members(1, 4) }, err: kerr.IneligibleReplica},
		{name: "old version", mod: func(in *alterPartitionInput) { in.isr = members(1, 3); in.version = 1 }, err: kerr.OperationNotAttempted},
		{name: "stale member epoch", mod: func(in *alterPartitionInput) { in.isr = []isrMember{{1, -1}, {2, 99}} }, err: kerr.IneligibleReplica},
		{name: "right member epoch", mod: func(in *alterPartitionInput) { in.isr = []isrMember{{1, 1}, {2, 2}} }},
		{name: "recovering asked of a recovered partition", mod: func(in *alterPartitionInput) { in.recovery = metadata.LeaderRecovering }, err: kerr.InvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := ok
			if tc.mod != nil {
				tc.mod(&in)
			}
			rec, code := alterPartitionChange(im, topic(t, im, "t"), 0, in, never)
			if code != tc.err {
				t.Fatalf("code = %v, want %v", code, tc.err)
			}
			if code != nil {
				return
			}
			if tc.isr == nil {
				if rec != nil {
					t.Fatalf("record for no change: %+v", rec)
				}
				return
			}
			if rec == nil || !reflect.DeepEqual(rec.ISR, tc.isr) {
				t.Fatalf("record = %+v, want ISR %v", rec, tc.isr)
			}
			mustApply(t, im, rec)
		})
	}
	if _, code := alterPartitionChange(im, topic(t, im, "t"), 3, ok, never); code != kerr.UnknownTopicOrPartition {
		t.Fatalf("unknown partition: %v", code)
	}
}

func TestAlterPartitionRecovering(t *testing.T) {
	im := withTopic(t, imageWith(t, brokers(1, 2)...), "t", testPartition{replicas: []int32{1, 2}, isr: []int32{1}, leader: 1})
	im = mustApply(t, im, &metadata.PartitionChangeRecord{TopicID: topicID("t"), Leader: metadata.NoLeaderChange, LeaderRecoveryState: metadata.LeaderRecovering})
	in := alterPartitionInput{brokerID: 1, partitionEpoch: 1, isr: []isrMember{{1, -1}, {2, -1}}, recovery: metadata.LeaderRecovering, version: 2}
	if _, code := alterPartitionChange(im, topic(t, im, "t"), 0, in, never); code != kerr.InvalidRequest {
		t.Fatalf("growing the ISR while recovering: %v", code)
	}
	in.recovery = metadata.LeaderRecovered
	rec, code := alterPartitionChange(im, topic(t, im, "t"), 0, in, never)
	if code != nil || rec.LeaderRecoveryState != metadata.LeaderRecovered {
		t.Fatalf("recovered: %+v %v", rec, code)
	}
}

func TestRebalance(t *testing.T) {
	// Broker 1 is preferred for 4 partitions and leads 1 of them; broker 2 preferred
	// for 2 and leads both.
	im := withTopic(t, imageWith(t, brokers(1, 2, 3)...), "t",
		testPartition{replicas: []int32{1, 2}, isr: []int32{1, 2}, leader: 1},
		testPartition{replicas: []int32{1, 2}, isr: []int32{1, 2}, leader: 2},
		testPartition{replicas: []int32{1, 3}, isr: []int32{1, 3}, leader: 3},
		testPartition{replicas: []int32{1, 3}, isr: []int32{3}, leader: 3}, // 1 not in the ISR
		testPartition{replicas: []int32{2, 1}, isr: []int32{2, 1}, leader: 2},
		testPartition{replicas: []int32{2, 1}, isr: []int32{2, 1}, leader: 2})
	recs := RebalanceRecords(im, 10, 0, never)
	if len(recs) != 2 {
		t.Fatalf("rebalance: %d records %+v", len(recs), recs)
	}
	next := mustApply(t, im, recs...)
	for i, want := range []int32{1, 1, 1, 3} {
		if p := part(t, next, "t", i); p.Leader != want {
			t.Errorf("p%d leader %d, want %d", i, p.Leader, want)
		}
	}
	if RebalanceRecords(im, 80, 0, never) != nil {
		t.Fatal("75% imbalance rebalanced at an 80% threshold")
	}
	if got := RebalanceRecords(im, 10, 1, never); len(got) != 1 {
		t.Fatalf("limit 1: %d records", len(got))
	}
}

func TestElectLeaderChange(t *testing.T) {
	im := withTopic(t, imageWith(t, testBroker{id: 1}, testBroker{id: 2}, testBroker{id: 3, fenced: true}), "t",
		testPartition{replicas: []int32{1, 2}, isr: []int32{1, 2}, leader: 2},
		testPartition{replicas: []int32{1, 2}, isr: []int32{1, 2}, leader: 1},
		testPartition{replicas: []int32{3, 2}, isr: []int32{3, 2}, leader: 2},
		testPartition{replicas: []int32{3, 2}, isr: []int32{3}, leader: -1})
	tp := topic(t, im, "t")
	for _, tc := range []struct {
		name  string
		index int32
		typ   int8
		err   *kerr.Error
		lead  int32
	}{
		{"preferred", 0, electionPreferred, nil, 1},
		{"preferred already leads", 1, electionPreferred, kerr.ElectionNotNeeded, 0},
		{"preferred fenced", 2, electionPreferred, kerr.PreferredLeaderNotAvailable, 0},
		{"unclean, has a leader", 0, electionUnclean, kerr.ElectionNotNeeded, 0},
		{"unclean, leaderless", 3, electionUnclean, nil, 2},
		{"unknown partition", 9, electionPreferred, kerr.UnknownTopicOrPartition, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := electLeaderChange(im, tp, tc.index, tc.typ, never)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || rec == nil {
				t.Fatalf("err = %v, rec %v", err, rec)
			}
			if p := part(t, mustApply(t, im, rec), "t", int(tc.index)); p.Leader != tc.lead {
				t.Fatalf("leader %d, want %d", p.Leader, tc.lead)
			}
		})
	}
}

// TestReassignmentSteps walks a reassignment from {1,2,3} to {4,2,5}: the new
// replicas are added, the old ones stay until the new ones are in the ISR, then the
// old ones leave, and the leader (1) moves because it is removed.
func TestReassignmentSteps(t *testing.T) {
	im := withTopic(t, imageWith(t, brokers(1, 2, 3, 4, 5)...), "t",
		testPartition{replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, leader: 1})
	rec, err := reassignChange(im, topic(t, im, "t"), 0, []int32{4, 2, 5}, false, never)
	if err != nil {
		t.Fatal(err)
	}
	im = mustApply(t, im, rec)
	p := part(t, im, "t", 0)
	if !reflect.DeepEqual(p.Replicas, []int32{4, 2, 5, 1, 3}) || !reflect.DeepEqual(p.Adding, []int32{4, 5}) ||
		!reflect.DeepEqual(p.Removing, []int32{1, 3}) || p.Leader != 1 {
		t.Fatalf("reassigning: %+v", p)
	}
	// 4 joins: not complete yet.
	in := alterPartitionInput{brokerID: 1, leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch,
		isr: []isrMember{{1, -1}, {2, -1}, {3, -1}, {4, -1}}, version: 2}
	ch, code := alterPartitionChange(im, topic(t, im, "t"), 0, in, never)
	if code != nil {
		t.Fatal(code)
	}
	im = mustApply(t, im, ch)
	if p = part(t, im, "t", 0); len(p.Adding) != 2 {
		t.Fatalf("completed before 5 joined: %+v", p)
	}
	// 5 joins: complete; 1 and 3 leave; 1 led, so 4 (first of the target) leads.
	in.partitionEpoch, in.isr = p.PartitionEpoch, append(in.isr, isrMember{5, -1})
	ch, code = alterPartitionChange(im, topic(t, im, "t"), 0, in, never)
	if code != nil {
		t.Fatal(code)
	}
	im = mustApply(t, im, ch)
	p = part(t, im, "t", 0)
	if !reflect.DeepEqual(p.Replicas, []int32{4, 2, 5}) || !reflect.DeepEqual(p.ISR, []int32{2, 4, 5}) || p.Adding != nil || p.Removing != nil || p.Leader != 4 {
		t.Fatalf("completed: %+v", p)
	}
	if _, err := cancelReassignChange(im, topic(t, im, "t"), 0, never); !errors.Is(err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancel without reassignment: %v", err)
	}
}

func TestReassignmentShapes(t *testing.T) {
	im := withTopic(t, imageWith(t, brokers(1, 2, 3, 4)...), "t",
		testPartition{replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, leader: 1})
	tp := topic(t, im, "t")
	// Removal only completes at once.
	rec, err := reassignChange(im, tp, 0, []int32{2, 3}, true, never)
	if err != nil {
		t.Fatal(err)
	}
	if p := part(t, mustApply(t, im, rec), "t", 0); !reflect.DeepEqual(p.Replicas, []int32{2, 3}) || p.Leader != 2 || p.Removing != nil {
		t.Fatalf("removal: %+v", p)
	}
	if _, err := reassignChange(im, tp, 0, []int32{2, 3}, false, never); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("rf change refused: %v", err)
	}
	if _, err := reassignChange(im, tp, 0, []int32{2, 9}, true, never); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Fatalf("unknown broker: %v", err)
	}
	// Reordering only.
	rec, _ = reassignChange(im, tp, 0, []int32{3, 2, 1}, false, never)
	if p := part(t, mustApply(t, im, rec), "t", 0); !reflect.DeepEqual(p.Replicas, []int32{3, 2, 1}) || p.Leader != 1 {
		t.Fatalf("reorder: %+v", p)
	}
	if rec, _ := reassignChange(im, tp, 0, []int32{1, 2, 3}, false, never); rec != nil {
		t.Fatalf("same assignment made %+v", rec)
	}
	// Cancel: 4 is being added; it leaves (the replicas keep their current order
	// without it, as Kafka's revert does).
	rec, _ = reassignChange(im, tp, 0, []int32{4, 2, 3}, false, never)
	mid := mustApply(t, im, rec)
	rec, err = cancelReassignChange(mid, topic(t, mid, "t"), 0, never)
	if err != nil {
		t.Fatal(err)
	}
	if p := part(t, mustApply(t, mid, rec), "t", 0); !reflect.DeepEqual(p.Replicas, []int32{2, 3, 1}) || p.Adding != nil || p.Removing != nil || p.Leader != 1 {
		t.Fatalf("cancelled: %+v", p)
	}
}

// TestReassignmentRemoveThenReaddKeepsTheReplicaOut walks the sequence of
// TestClusterBenchFullSync on the controller's side: {1,2,3} with 3 in the ISR is
// reassigned to {1,2} (3 leaves the replicas and the ISR at once, and the same leader
// is named again so that the leader epoch moves: a fetch node 3 sent before it left
// is fenced), then to {1,2,3} again. Node 3 comes back as an adding replica outside
// the ISR, in the removal's leader epoch with a newer partition epoch; an expansion the leader proposed against an
// earlier partition epoch is refused (INVALID_UPDATE_VERSION), and a cancel takes 3 out
// without putting it anywhere else. Only an AlterPartition on the current partition
// epoch brings 3 in, and that completes the reassignment.
func TestReassignmentRemoveThenReaddKeepsTheReplicaOut(t *testing.T) {
	im := withTopic(t, imageWith(t, brokers(1, 2, 3)...), "t",
		testPartition{replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, leader: 1})
	before := part(t, im, "t", 0)
	rec, err := reassignChange(im, topic(t, im, "t"), 0, []int32{1, 2}, true, never)
	if err != nil {
		t.Fatal(err)
	}
	im = mustApply(t, im, rec)
	removed := part(t, im, "t", 0)
	if !reflect.DeepEqual(removed.Replicas, []int32{1, 2}) || !reflect.DeepEqual(removed.ISR, []int32{1, 2}) || removed.Adding != nil ||
		removed.Leader != 1 || removed.LeaderEpoch != before.LeaderEpoch+1 {
		t.Fatalf("removal: %+v (leader epoch before %d)", removed, before.LeaderEpoch)
	}
	rec, err = reassignChange(im, topic(t, im, "t"), 0, []int32{1, 2, 3}, true, never)
	if err != nil {
		t.Fatal(err)
	}
	im = mustApply(t, im, rec)
	p := part(t, im, "t", 0)
	if !reflect.DeepEqual(p.Replicas, []int32{1, 2, 3}) || !reflect.DeepEqual(p.ISR, []int32{1, 2}) ||
		!reflect.DeepEqual(p.Adding, []int32{3}) || p.Leader != 1 || p.LeaderEpoch != removed.LeaderEpoch {
		t.Fatalf("re-added: %+v", p)
	}
	if p.PartitionEpoch <= removed.PartitionEpoch || removed.PartitionEpoch <= before.PartitionEpoch {
		t.Fatalf("partition epochs %d, %d, %d: not increasing", before.PartitionEpoch, removed.PartitionEpoch, p.PartitionEpoch)
	}
	expand := func(pe int32) alterPartitionInput {
		return alterPartitionInput{brokerID: 1, leaderEpoch: p.LeaderEpoch, partitionEpoch: pe,
			isr: []isrMember{{1, -1}, {2, -1}, {3, -1}}, version: 3}
	}
	for _, pe := range []int32{before.PartitionEpoch, removed.PartitionEpoch} {
		if _, code := alterPartitionChange(im, topic(t, im, "t"), 0, expand(pe), never); code != kerr.InvalidUpdateVersion {
			t.Fatalf("an expansion on partition epoch %d (now %d): %v, want INVALID_UPDATE_VERSION", pe, p.PartitionEpoch, code)
		}
	}
	rec, err = cancelReassignChange(im, topic(t, im, "t"), 0, never)
	if err != nil {
		t.Fatal(err)
	}
	if c := part(t, mustApply(t, im, rec), "t", 0); !reflect.DeepEqual(c.ISR, []int32{1, 2}) || !reflect.DeepEqual(c.Replicas, []int32{1, 2}) {
		t.Fatalf("cancelled: %+v", c)
	}
	ch, code := alterPartitionChange(im, topic(t, im, "t"), 0, expand(p.PartitionEpoch), never)
	if code != nil {
		t.Fatal(code)
	}
	if done := part(t, mustApply(t, im, ch), "t", 0); !reflect.DeepEqual(done.ISR, []int32{1, 2, 3}) || done.Adding != nil || done.Removing != nil {
		t.Fatalf("joined: %+v", done)
	}
}
