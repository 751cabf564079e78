package controller

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// elrImage is imageWith at metadata.version 4.1-IV0 with eligible.leader.replicas.version
// at level (1: on).
func elrImage(t testing.TB, level int16, bs ...testBroker) *metadata.Image {
	t.Helper()
	im := mustApply(t, &metadata.Image{}, &metadata.FeatureLevelRecord{Name: metadata.FeatureMetadataVersion, Level: 26},
		&metadata.FeatureLevelRecord{Name: metadata.FeatureELRVersion, Level: level})
	var recs []metadata.Record
	for i, b := range bs {
		recs = append(recs, &metadata.RegisterBrokerRecord{ID: b.id, Epoch: int64(i + 1), Fenced: b.fenced, InControlledShutdown: b.shutdown,
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9000 + b.id}}})
	}
	return mustApply(t, im, recs...)
}

func policyOf(minISR int, r RecoveryStrategy) PolicyFunc {
	return func(string) ElectionPolicy { return ElectionPolicy{MinISR: minISR, Recovery: r} }
}

// TestELRElection is partitionChange at eligible.leader.replicas.version 1: the rules of
// Kafka's PartitionChangeBuilder (maybePopulateTargetElr, electLeader,
// maybeUpdateLastKnownLeader) on KIP-966's cases.
func TestELRElection(t *testing.T) {
	up := brokers(1, 2, 3)
	down := func(ids ...int32) []testBroker {
		out := brokers(1, 2, 3)
		for i := range out {
			out[i].fenced = slices.Contains(ids, out[i].id)
		}
		return out
	}
	r123 := []int32{1, 2, 3}
	for _, tc := range []struct {
		name     string
		level    int16 // eligible.leader.replicas.version (0: the classic rule)
		brokers  []testBroker
		p        testPartition
		isr      []int32 // target ISR (nil: unchanged)
		unclean  int32   // a broker restarting after an unclean shutdown (0: none)
		minISR   int
		strategy RecoveryStrategy
		mode     electionMode
		replicas []int32 // target replicas (reassignment)

		leader              int32
		isrAfter, elr, lkel []int32
		recovering          bool
	}{
		{name: "shrink to min ISR: no ELR", level: 1, brokers: up, minISR: 2,
			p: testPartition{replicas: r123, isr: r123, leader: 1}, isr: []int32{1, 2},
			leader: 1, isrAfter: []int32{1, 2}},
		{name: "shrink below min ISR: the leaver is eligible", level: 1, brokers: up, minISR: 2,
			p: testPartition{replicas: r123, isr: []int32{1, 2}, leader: 1}, isr: []int32{1},
			leader: 1, isrAfter: []int32{1}, elr: []int32{2}},
		{name: "a replica out of the ISR before it fell below min ISR is not eligible", level: 1, brokers: up, minISR: 2,
			p: testPartition{replicas: r123, isr: []int32{1, 2}, leader: 1}, isr: []int32{1},
			leader: 1, isrAfter: []int32{1}, elr: []int32{2}},
		{name: "ISR back at min ISR clears the ELR", level: 1, brokers: up, minISR: 2,
			p: testPartition{replicas: r123, isr: []int32{1}, leader: 1, elr: []int32{2}}, isr: []int32{1, 3},
			leader: 1, isrAfter: []int32{1, 3}},
		{name: "an ELR member that rejoins leaves the ELR", level: 1, brokers: up, minISR: 3,
			p: testPartition{replicas: r123, isr: []int32{1}, leader: 1, elr: []int32{2, 3}}, isr: []int32{1, 2},
			leader: 1, isrAfter: []int32{1, 2}, elr: []int32{3}},
		{name: "the last ISR member fenced: no leader, ISR empty, it is eligible, last known leader", level: 1, brokers: down(1, 2), minISR: 2,
			p: testPartition{replicas: r123, isr: []int32{1}, leader: 1, elr: []int32{2}}, isr: []int32{},
			leader: -1, isrAfter: []int32{}, elr: []int32{1, 2}, lkel: []int32{1}},
		{name: "classic rule: the last ISR member stays", level: 0, brokers: down(1), minISR: 2,
			p: testPartition{replicas: r123, isr: []int32{1}, leader: 1}, isr: []int32{},
			leader: -1, isrAfter: []int32{1}},
		{name: "elected from the ELR: it becomes the ISR", level: 1, brokers: down(1, 3), minISR: 2,
			p:      testPartition{replicas: r123, isr: []int32{}, leader: -1, elr: []int32{2, 3}, lastKnown: []int32{1}},
			leader: 2, isrAfter: []int32{2}, elr: []int32{3}},
		{name: "a fenced ELR member is waited for", level: 1, brokers: down(2), minISR: 2,
			p:      testPartition{replicas: r123, isr: []int32{}, leader: -1, elr: []int32{2}, lastKnown: []int32{1}},
			leader: -1, isrAfter: []int32{}, elr: []int32{2}, lkel: []int32{1}},
		{name: "Balanced: the last known leader once the ISR and the ELR are empty", level: 1, brokers: down(2, 3), minISR: 2,
			p: testPartition{replicas: r123, isr: []int32{}, leader: -1, lastKnown: []int32{1}}, strategy: RecoveryBalanced,
			leader: 1, isrAfter: []int32{1}, recovering: true},
		{name: "None: never the last known leader", level: 1, brokers: down(2, 3), minISR: 2,
			p: testPartition{replicas: r123, isr: []int32{}, leader: -1, lastKnown: []int32{1}}, strategy: RecoveryNone,
			leader: -1, isrAfter: []int32{}, lkel: []int32{1}},
		{name: "Balanced: never a replica that is not the last known leader", level: 1, brokers: down(1), minISR: 2,
			p: testPartition{replicas: r123, isr: []int32{}, leader: -1, lastKnown: []int32{1}}, strategy: RecoveryBalanced,
			leader: -1, isrAfter: []int32{}, lkel: []int32{1}},
		{name: "Aggressive: any live replica", level: 1, brokers: down(1), minISR: 2,
			p: testPartition{replicas: r123, isr: []int32{}, leader: -1, lastKnown: []int32{1}}, strategy: RecoveryAggressive,
			leader: 2, isrAfter: []int32{2}, recovering: true},
		{name: "Aggressive still prefers the ELR", level: 1, brokers: down(1), minISR: 2,
			p: testPartition{replicas: r123, isr: []int32{}, leader: -1, elr: []int32{3}, lastKnown: []int32{1}}, strategy: RecoveryAggressive,
			leader: 3, isrAfter: []int32{3}},
		{name: "an unclean shutdown leaves the ELR", level: 1, brokers: down(3), minISR: 3, unclean: 3,
			p:      testPartition{replicas: r123, isr: []int32{1}, leader: 1, elr: []int32{2, 3}},
			leader: 1, isrAfter: []int32{1}, elr: []int32{2}},
		{name: "an unclean shutdown of the leader: an ELR member leads", level: 1, brokers: down(1), minISR: 2, unclean: 1,
			p:      testPartition{replicas: r123, isr: []int32{1}, leader: 1, elr: []int32{2}},
			leader: 2, isrAfter: []int32{2}},
		{name: "an unclean shutdown of the last replica standing: it stays the last known leader only", level: 1, brokers: down(1, 2), minISR: 2, unclean: 1,
			p:      testPartition{replicas: r123, isr: []int32{1}, leader: 1, elr: []int32{2}},
			leader: -1, isrAfter: []int32{}, elr: []int32{2}, lkel: []int32{1}},
		{name: "min ISR above the replication factor counts as it", level: 1, brokers: up, minISR: 3,
			p: testPartition{replicas: []int32{1, 2}, isr: []int32{1, 2}, leader: 1}, isr: []int32{1},
			leader: 1, isrAfter: []int32{1}, elr: []int32{2}},
		{name: "a preferred election keeps the ELR", level: 1, brokers: up, minISR: 3, mode: electPreferred,
			p:      testPartition{replicas: r123, isr: []int32{2, 1}, leader: 2, elr: []int32{3}},
			leader: 1, isrAfter: []int32{2, 1}, elr: []int32{3}},
		{name: "a reassignment leaves only replicas in the ELR", level: 1, brokers: up, minISR: 3,
			p: testPartition{replicas: r123, isr: []int32{1}, leader: 1, elr: []int32{2, 3}}, replicas: []int32{1, 2},
			leader: 1, isrAfter: []int32{1}, elr: []int32{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := withTopic(t, elrImage(t, tc.level, tc.brokers...), "t", tc.p)
			c := newChange(im, topic(t, im, "t"), 0, tc.mode, policyOf(tc.minISR, tc.strategy))
			c.isr, c.replicas = tc.isr, tc.replicas
			if tc.unclean > 0 {
				c.uncleanShutdown = tc.unclean
			}
			r := c.compute()
			norm := func(v []int32) []int32 {
				if len(v) == 0 {
					return nil
				}
				return v
			}
			if r.leader != tc.leader || !slices.Equal(norm(r.isr), norm(tc.isrAfter)) || !slices.Equal(r.elr, tc.elr) ||
				!slices.Equal(r.lastKnownELR, tc.lkel) || (r.recovery == metadata.LeaderRecovering) != tc.recovering {
				t.Fatalf("leader %d ISR %v ELR %v last known %v recovery %d;\nwant %d %v %v %v recovering %v",
					r.leader, r.isr, r.elr, r.lastKnownELR, r.recovery, tc.leader, tc.isrAfter, tc.elr, tc.lkel, tc.recovering)
			}
			if rec := c.build(); rec != nil {
				next := mustApply(t, im, rec)
				p := part(t, next, "t", 0)
				if p.Leader != tc.leader || !slices.Equal(p.ELR, tc.elr) || !slices.Equal(p.LastKnownELR, tc.lkel) {
					t.Fatalf("applied: %+v", p)
				}
			}
		})
	}
}

// TestELRLastReplicaStanding is KIP-966's example: replicas 0, 1, 2, min.insync.replicas
// 2. Broker 0 then broker 1 leave the ISR; broker 2, the last in it, stops uncleanly
// and loses records; broker 1 comes back. The classic rule re-elects broker 2 (its
// records lost, and the followers' truncated to match); with ELR, broker 1 leads, and
// broker 0, which left the ISR before it fell below min.insync.replicas, never does.
func TestELRLastReplicaStanding(t *testing.T) {
	policy := policyOf(2, RecoveryBalanced)
	im := withTopic(t, elrImage(t, 1, testBroker{id: 4}, testBroker{id: 5}, testBroker{id: 6}), "t",
		testPartition{replicas: []int32{4, 5, 6}, isr: []int32{4, 5, 6}, leader: 6})
	step := func(what string, recs []metadata.Record, leader int32, isr, elr, lkel []int32) {
		t.Helper()
		im = mustApply(t, im, recs...)
		p := part(t, im, "t", 0)
		if p.Leader != leader || !slices.Equal(p.ISR, isr) || !slices.Equal(p.ELR, elr) || !slices.Equal(p.LastKnownELR, lkel) {
			t.Fatalf("%s: leader %d ISR %v ELR %v last known %v; want %d %v %v %v", what, p.Leader, p.ISR, p.ELR, p.LastKnownELR, leader, isr, elr, lkel)
		}
	}
	alter := func(isr ...int32) []metadata.Record {
		p := part(t, im, "t", 0)
		in := alterPartitionInput{brokerID: p.Leader, leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch, version: 2}
		for _, id := range isr {
			in.isr = append(in.isr, isrMember{id: id, epoch: -1})
		}
		rec, code := alterPartitionChange(im, topic(t, im, "t"), 0, in, policy)
		if code != nil {
			t.Fatal(code)
		}
		return []metadata.Record{rec}
	}
	// T0, T1: network partitions take 4, then 5, out of the ISR, and cut them off
	// from the controller (their sessions expire: fenced).
	step("T0: 4 leaves", alter(5, 6), 6, []int32{5, 6}, nil, nil)
	step("T1: 5 leaves", alter(6), 6, []int32{6}, []int32{5}, nil)
	for _, id := range []int32{4, 5} {
		step("fenced", FenceBrokerRecords(im, id, policy), 6, []int32{6}, []int32{5}, nil)
	}
	// T2: 6 stops uncleanly (it is fenced, then registers again without a clean
	// shutdown: it may have lost records).
	step("T2: 6 fenced", FenceBrokerRecords(im, 6, policy), -1, nil, []int32{5, 6}, []int32{6})
	b6, _ := im.Broker(6)
	reg := &metadata.RegisterBrokerRecord{ID: 6, Epoch: b6.Epoch + 10, Fenced: true, Endpoints: b6.Endpoints}
	step("T2: 6 registers after an unclean shutdown", RegisterBrokerRecords(im, reg, policy, false), -1, nil, []int32{5}, []int32{6})
	// 6 is back and unfenced: it is neither in the ISR nor in the ELR; Balanced would
	// take the last known leader only with an empty ELR.
	step("6 unfenced", UnfenceBrokerRecords(im, 6, policy), -1, nil, []int32{5}, []int32{6})
	// T3: the network heals; 4 and 5 come back. 4 is not eligible; 5 is, and leads
	// with every committed record.
	step("4 unfenced", UnfenceBrokerRecords(im, 4, policy), -1, nil, []int32{5}, []int32{6})
	step("5 unfenced: elected from the ELR", UnfenceBrokerRecords(im, 5, policy), 5, []int32{5}, nil, nil)
	if p := part(t, im, "t", 0); p.LeaderRecoveryState != metadata.LeaderRecovered {
		t.Fatalf("an election from the ELR is clean: %+v", p)
	}
	// 6 catches up and rejoins: at min ISR again.
	step("6 rejoins", alter(5, 6), 5, []int32{5, 6}, nil, nil)
}

// TestELRCleanShutdown: a broker that stopped cleanly keeps its ELR membership across
// its restart (the registration names its last epoch), and is elected from the ELR.
func TestELRCleanShutdown(t *testing.T) {
	policy := policyOf(2, RecoveryBalanced)
	im := withTopic(t, elrImage(t, 1, brokers(1, 2)...), "t", testPartition{replicas: []int32{1, 2}, isr: []int32{1, 2}, leader: 1})
	im = mustApply(t, im, ControlledShutdownRecords(im, 2, policy)...)
	if p := part(t, im, "t", 0); !slices.Equal(p.ISR, []int32{1}) || !slices.Equal(p.ELR, []int32{2}) {
		t.Fatalf("after 2's controlled shutdown: %+v", p)
	}
	im = mustApply(t, im, ControlledShutdownRecords(im, 1, policy)...)
	if p := part(t, im, "t", 0); p.Leader != -1 || len(p.ISR) != 0 || !slices.Equal(p.ELR, []int32{1, 2}) || !slices.Equal(p.LastKnownELR, []int32{1}) {
		t.Fatalf("after 1's controlled shutdown: %+v", p)
	}
	b2, _ := im.Broker(2)
	reg := &metadata.RegisterBrokerRecord{ID: 2, Epoch: b2.Epoch + 10, Fenced: true, Endpoints: b2.Endpoints}
	im = mustApply(t, im, RegisterBrokerRecords(im, reg, policy, true)...)
	im = mustApply(t, im, UnfenceBrokerRecords(im, 2, policy)...)
	if p := part(t, im, "t", 0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) || !slices.Equal(p.ELR, []int32{1}) || p.LastKnownELR != nil {
		t.Fatalf("2 back after a clean shutdown: %+v", p)
	}
}

// TestELRDowngradeRecords: disabling ELR takes every partition back to the classic
// rule in records that apply before the level, and refuses a partition with nothing
// to go back to.
func TestELRDowngradeRecords(t *testing.T) {
	im := withTopic(t, elrImage(t, 1, testBroker{id: 1}, testBroker{id: 2, fenced: true}, testBroker{id: 3, fenced: true}), "t",
		testPartition{replicas: []int32{1, 2, 3}, isr: []int32{1}, leader: 1, elr: []int32{2}},
		testPartition{replicas: []int32{1, 2, 3}, isr: []int32{}, leader: -1, elr: []int32{2, 3}, lastKnown: []int32{1}},
		testPartition{replicas: []int32{2, 3}, isr: []int32{}, leader: -1, lastKnown: []int32{3}},
		testPartition{replicas: []int32{1, 2}, isr: []int32{}, leader: -1, elr: []int32{1}},
		testPartition{replicas: []int32{1, 2}, isr: []int32{1, 2}, leader: 1})
	recs, why := ELRDowngradeRecords(im)
	if why != "" || len(recs) != 4 {
		t.Fatalf("records %v, %q", recs, why)
	}
	next := mustApply(t, im, append(recs, &metadata.FeatureLevelRecord{Name: metadata.FeatureELRVersion})...)
	for i, want := range []struct {
		leader int32
		isr    []int32
	}{{1, []int32{1}}, {-1, []int32{2, 3}}, {-1, []int32{3}}, {1, []int32{1}}, {1, []int32{1, 2}}} {
		p := part(t, next, "t", i)
		if p.Leader != want.leader || !slices.Equal(p.ISR, want.isr) || p.ELR != nil || p.LastKnownELR != nil {
			t.Errorf("p%d = %+v, want leader %d ISR %v", i, p, want.leader, want.isr)
		}
	}
	stuck := withTopic(t, elrImage(t, 1, brokers(1, 2)...), "t", testPartition{replicas: []int32{1, 2}, isr: []int32{}, leader: -1})
	if _, why := ELRDowngradeRecords(stuck); why == "" {
		t.Fatal("a partition with nothing to go back to was taken back")
	}
}

// TestELRSafetyRecords: enabling ELR sets the cluster-level min.insync.replicas from the
// controller's static keys and removes the broker-level ones.
func TestELRSafetyRecords(t *testing.T) {
	im := mustApply(t, &metadata.Image{},
		&metadata.ConfigRecord{Resource: metadata.ResourceBroker, Name: "1", Key: minISRKey, Value: metadata.StringPtr("3")},
		&metadata.ConfigRecord{Resource: metadata.ResourceBroker, Name: "2", Key: "log.retention.ms", Value: metadata.StringPtr("5")})
	recs := ELRSafetyRecords(im, "2")
	next := mustApply(t, im, recs...)
	if v := next.Configs(metadata.ResourceBroker, "")[minISRKey]; v != "2" || len(recs) != 2 {
		t.Fatalf("cluster-level %q, records %v", v, recs)
	}
	if _, ok := next.Configs(metadata.ResourceBroker, "1")[minISRKey]; ok {
		t.Fatal("broker 1's min.insync.replicas kept")
	}
	if len(ELRSafetyRecords(next, "2")) != 0 {
		t.Fatal("records for a cluster that has them")
	}
}

// featuredRegistration is registration with this build's features and a previous
// broker epoch.
func featuredRegistration(id int32, incarnation byte, previous int64) *kmsg.BrokerRegistrationRequest {
	r := registration(id, incarnation, "")
	for _, f := range thisBuild() {
		rf := kmsg.NewBrokerRegistrationRequestFeature()
		rf.Name, rf.MinSupportedVersion, rf.MaxSupportedVersion = f.Name, f.Min, f.Max
		r.Features = append(r.Features, rf)
	}
	r.PreviousBrokerEpoch = previous
	return r
}

// TestELRThroughController drives ELR through the controller: enabling it sets the
// cluster-level min.insync.replicas from the static keys; broker-level ones and the
// removal of the cluster-level one are refused; a shrink below min.insync.replicas
// makes an ELR that a change of min.insync.replicas clears; a registration that
// names the registered epoch (a clean shutdown) keeps the broker's ELR membership,
// one that does not loses it; disabling ELR takes the partitions back to the classic
// rule.
func TestELRThroughController(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Static = map[string]string{"min.insync.replicas": "2"} })
	epochs := map[int32]int64{}
	for _, id := range []int32{1, 2, 3} {
		r := h.do(featuredRegistration(id, 1, -1)).(*kmsg.BrokerRegistrationResponse)
		if r.ErrorCode != 0 {
			t.Fatal(code(r.ErrorCode))
		}
		epochs[id] = r.BrokerEpoch
	}
	for _, id := range []int32{1, 2, 3} {
		if hb := h.heartbeat(id, epochs[id], nil); hb.IsFenced {
			t.Fatalf("broker %d fenced", id)
		}
	}
	up := FeatureUpdate{metadata.FeatureELRVersion, 1, UpgradeTypeUpgrade}
	if r := h.do(updateFeatures(2, false, up)).(*kmsg.UpdateFeaturesResponse); r.ErrorCode != 0 {
		t.Fatalf("enable ELR: %v", *r.ErrorMessage)
	}
	im := h.image()
	if !im.ELREnabled() || im.Configs(metadata.ResourceBroker, "")[minISRKey] != "2" {
		t.Fatalf("after enabling: levels %v, cluster configs %v", im.FinalizedFeatures(), im.Configs(metadata.ResourceBroker, ""))
	}
	for _, tc := range []struct {
		req  *kmsg.IncrementalAlterConfigsRequest
		want string
	}{
		{incremental(kmsg.ConfigResourceTypeBroker, "1", minISRKey, kmsg.IncrementalAlterConfigOpSet, "1"), "Broker-level min.insync.replicas cannot be altered while ELR is enabled."},
		{incremental(kmsg.ConfigResourceTypeBroker, "", minISRKey, kmsg.IncrementalAlterConfigOpDelete, nil), "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."},
	} {
		rr := h.do(tc.req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		if rr.ErrorCode != kerr.InvalidConfig.Code || rr.ErrorMessage == nil || *rr.ErrorMessage != tc.want {
			t.Fatalf("%v: %v %v", tc.req.Resources[0], code(rr.ErrorCode), rr.ErrorMessage)
		}
	}
	if tr := h.createTopic("t", 1, 3); tr.ErrorCode != 0 {
		t.Fatal(code(tr.ErrorCode))
	}
	ti := topic(t, h.image(), "t")
	p := ti.Partitions[0]
	others := without(p.Replicas, p.Leader)
	// The leader shrinks the ISR to itself: the other two are eligible.
	shrink := func() {
		t.Helper()
		p := part(t, h.image(), "t", 0)
		r := h.do(alterPartition(p.Leader, epochs[p.Leader], ti.ID, p, p.Leader)).(*kmsg.AlterPartitionResponse)
		if c := r.Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatal(code(c))
		}
		if p := part(t, h.image(), "t", 0); !slices.Equal(p.ELR, others) {
			t.Fatalf("after the shrink: %+v", p)
		}
	}
	shrink()
	// A change of the topic's min.insync.replicas clears its ELR.
	if rr := h.do(incremental(kmsg.ConfigResourceTypeTopic, "t", minISRKey, kmsg.IncrementalAlterConfigOpSet, "2")).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; rr.ErrorCode != 0 {
		t.Fatal(code(rr.ErrorCode))
	}
	if p := part(t, h.image(), "t", 0); p.ELR != nil {
		t.Fatalf("ELR after min.insync.replicas changed: %+v", p)
	}
	// Expand and shrink again.
	p = part(t, h.image(), "t", 0)
	h.do(alterPartition(p.Leader, epochs[p.Leader], ti.ID, p, p.Replicas...))
	shrink()
	// others[0] restarts after a clean shutdown (it names its epoch): it stays
	// eligible; others[1] restarts after a crash: it is not.
	clean, crashed := others[0], others[1]
	for _, tc := range []struct {
		id       int32
		previous int64
	}{{clean, epochs[clean]}, {crashed, -1}} {
		req := featuredRegistration(tc.id, 2, tc.previous)
		SetPredecessor(req, metadata.UUID{0: byte(tc.id), 1: 1}) // a restart on its directories
		r := h.do(req).(*kmsg.BrokerRegistrationResponse)
		if r.ErrorCode != 0 {
			t.Fatal(code(r.ErrorCode))
		}
		epochs[tc.id] = r.BrokerEpoch
	}
	if p := part(t, h.image(), "t", 0); !slices.Equal(p.ELR, []int32{clean}) {
		t.Fatalf("after the restarts: %+v (clean %d, crashed %d)", p, clean, crashed)
	}
	// Disabling ELR clears it (the ISR is not empty: it stays).
	down := FeatureUpdate{metadata.FeatureELRVersion, 0, UpgradeTypeSafeDowngrade}
	if r := h.do(updateFeatures(2, false, down)).(*kmsg.UpdateFeaturesResponse); r.ErrorCode != 0 {
		t.Fatalf("disable ELR: %v", *r.ErrorMessage)
	}
	if p := part(t, h.image(), "t", 0); p.ELR != nil || h.image().ELREnabled() {
		t.Fatalf("after disabling: %+v", p)
	}
	// Broker-level min.insync.replicas is allowed again.
	if rr := h.do(incremental(kmsg.ConfigResourceTypeBroker, "1", minISRKey, kmsg.IncrementalAlterConfigOpSet, "1")).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; rr.ErrorCode != 0 {
		t.Fatal(code(rr.ErrorCode))
	}
}

// TestPolicyFunc: a topic's min.insync.replicas by the usual layers; its strategy
// from unclean.leader.election.enable (true: Aggressive, false: Balanced), or, with
// unclean.recovery.manager.enabled, from unclean.recovery.strategy.
func TestPolicyFunc(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Static = map[string]string{"min.insync.replicas": "2"} })
	im := withTopic(t, withTopic(t, imageWith(t, brokers(1)...), "a", testPartition{replicas: []int32{1}, isr: []int32{1}, leader: 1}),
		"b", testPartition{replicas: []int32{1}, isr: []int32{1}, leader: 1})
	set := func(rt metadata.ResourceType, name, key, value string) {
		im = mustApply(t, im, &metadata.ConfigRecord{Resource: rt, Name: name, Key: key, Value: metadata.StringPtr(value)})
	}
	check := func(what string, topic string, want ElectionPolicy) {
		t.Helper()
		if got := h.c.policyFunc(im)(topic); got != want {
			t.Errorf("%s: %s: %+v, want %+v", what, topic, got, want)
		}
	}
	check("static min ISR", "a", ElectionPolicy{2, RecoveryBalanced})
	set(metadata.ResourceTopic, "a", "min.insync.replicas", "3")
	set(metadata.ResourceTopic, "a", "unclean.leader.election.enable", "true")
	set(metadata.ResourceTopic, "b", "unclean.recovery.strategy", "None")
	check("unclean.leader.election.enable", "a", ElectionPolicy{3, RecoveryAggressive})
	check("a strategy without the manager", "b", ElectionPolicy{2, RecoveryBalanced})
	set(metadata.ResourceBroker, "", "unclean.recovery.manager.enabled", "true")
	check("the manager: the default strategy", "a", ElectionPolicy{3, RecoveryBalanced})
	check("the manager: the topic's strategy", "b", ElectionPolicy{2, RecoveryNone})
	set(metadata.ResourceBroker, "", "unclean.recovery.strategy", "aggressive")
	check("the manager: the cluster's strategy", "a", ElectionPolicy{3, RecoveryAggressive})
}
