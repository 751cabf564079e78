package replication

import (
	"errors"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine"
)

// fakeClock is a settable Clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time           { return c.t }
func (c *fakeClock) advance(d time.Duration)  { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock                { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func tp0() engine.TopicPartition              { return engine.TopicPartition{Topic: "t", Partition: 0} }
func leaderState(isr ...int32) PartitionState { return stateOf(1, 0, 0, []int32{1, 2, 3}, isr, 2) }

func stateOf(leader, epoch, pe int32, replicas, isr []int32, minISR int) PartitionState {
	return PartitionState{Topic: "t", TopicID: [16]byte{1}, Partition: 0, Replicas: replicas, ISR: isr,
		Leader: leader, LeaderEpoch: epoch, PartitionEpoch: pe, MinISR: minISR}
}

// newTestManager is a Manual Manager of node 1 over memory logs (fsync or not).
func newTestManager(t *testing.T, fsync bool) (*Manager, *memStore, *fakeClock) {
	t.Helper()
	store, clock := newMemStore(fsync), newFakeClock()
	m, err := NewManager(Config{NodeID: 1, Logs: store, Clock: clock, Manual: true, ReplicaLagTimeMax: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, store, clock
}

// produce runs one acks produce of value v on p and returns its part once settled
// (nil if still waiting).
func produce(m *Manager, p *Partition, acks int16, v string) (*Produce, error) {
	pr := &Produce{}
	done := false
	pr.Begin(m, acks, time.Second, func() { done = true })
	_, err := pr.Append(p, makeBatch(v))
	pr.Seal()
	if err != nil {
		return nil, err
	}
	if !done {
		return pr, nil
	}
	return pr, pr.Part(0).Err
}

func TestHighWatermarkIsTheISRMinimum(t *testing.T) {
	m, _, _ := newTestManager(t, false)
	if err := m.Apply(Delta{Leaders: []PartitionState{leaderState(1, 2)}}); err != nil {
		t.Fatal(err)
	}
	p := m.Partition(tp0())
	pr, err := produce(m, p, -1, "a")
	if err != nil {
		t.Fatal(err)
	}
	produce(m, p, 1, "b")
	if hw := p.Log().HighWatermark(); hw != 0 {
		t.Fatalf("HW %d before any follower fetched", hw)
	}
	if res, err := p.FollowerFetch(2, 5, 1, 0, 0, 17); err != nil || res.HighWatermark != 1 {
		t.Fatalf("after replica 2 fetched at 1: HW %d, %v", res.HighWatermark, err)
	}
	if pr.Part(0).settled != true || pr.Part(0).Err != nil {
		t.Fatalf("acks=all not answered at HW 1: %+v", pr.Part(0))
	}
	if res, _ := p.FollowerFetch(2, 5, 2, 0, 0, 17); res.HighWatermark != 2 {
		t.Fatalf("HW %d after replica 2 fetched at 2", res.HighWatermark)
	}
	// Replica 3, outside the ISR, catches up: an expansion is proposed, and while it is
	// pending the HW counts replica 3 too (the maximal ISR).
	if _, err := p.FollowerFetch(3, 7, 2, 0, 0, 17); err != nil {
		t.Fatal(err)
	}
	st := p.State()
	if len(st.PendingISR) != 3 || len(st.MaximalISR) != 3 {
		t.Fatalf("no expansion pending: %+v", st)
	}
	produce(m, p, 1, "c")
	if res, _ := p.FollowerFetch(2, 5, 3, 0, 0, 17); res.HighWatermark != 2 {
		t.Fatalf("HW %d passed replica 3 while its expansion is pending", res.HighWatermark)
	}
	req := m.TakeAlterPartition()
	if req == nil || len(req.Topics[0].Partitions[0].NewISR) != 3 || req.Topics[0].Partitions[0].NewEpochISR[2].BrokerEpoch != 7 {
		t.Fatalf("expansion request %+v", req)
	}
	// A fetch at a lower offset (a late retried request, or a replica that lost
	// records: TestInSyncReplicaBelowHWLeavesAtOnce) never moves the HW back.
	if res, _ := p.FollowerFetch(2, 5, 1, 0, 0, 17); res.HighWatermark != 2 {
		t.Fatalf("HW %d after an older fetch", res.HighWatermark)
	}
}

func TestHighWatermarkWaitsForLeaderDurability(t *testing.T) {
	m, store, _ := newTestManager(t, true)
	m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 0, 0, []int32{1}, []int32{1}, 1)}})
	p := m.Partition(tp0())
	pr, err := produce(m, p, -1, "a")
	if err != nil || pr == nil {
		t.Fatal(err)
	}
	if hw := p.Log().HighWatermark(); hw != 0 {
		t.Fatalf("HW %d before the leader's fsync", hw)
	}
	store.log(tp0()).flush()
	if hw := p.Log().HighWatermark(); hw != 1 || !pr.Part(0).settled {
		t.Fatalf("HW %d after the fsync, settled %v", hw, pr.Part(0).settled)
	}
}

func TestFollowerFetchErrors(t *testing.T) {
	m, _, _ := newTestManager(t, false)
	m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 3, 0, []int32{1, 2}, []int32{1, 2}, 1)}})
	p := m.Partition(tp0())
	for _, v := range []string{"a", "b", "c"} {
		produce(m, p, 1, v)
	}
	cases := []struct {
		name                string
		replica             int32
		brokerEpoch, offset int64
		last, current       int32
		want                error
	}{
		{"not a replica", 9, 1, 0, -1, 3, ErrUnknownReplica},
		{"fenced epoch", 2, 1, 0, -1, 2, ErrFencedLeaderEpoch},
		{"unknown epoch", 2, 1, 0, -1, 4, ErrUnknownLeaderEpoch},
		{"past the end", 2, 1, 4, -1, 3, ErrOffsetOutOfRange},
		{"ok", 2, 10, 1, 3, 3, nil},
		{"older incarnation", 2, 9, 1, 3, 3, ErrStaleBrokerEpoch},
	}
	for _, c := range cases {
		_, err := p.FollowerFetch(c.replica, c.brokerEpoch, c.offset, c.last, c.current, 17)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A follower that ended epoch 2 at offset 5 diverges from this log (epoch 3 from 0).
	res, err := p.FollowerFetch(2, 10, 5, 2, 3, 17)
	if err != nil || !res.Diverging || res.DivergingEpoch != 2 || res.DivergingEndOffset != 0 {
		t.Fatalf("diverging: %+v %v", res, err)
	}
}

func TestAcksAllAndMinISR(t *testing.T) {
	m, _, clock := newTestManager(t, false)
	m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 0, 0, []int32{1, 2, 3}, []int32{1}, 2)}})
	p := m.Partition(tp0())
	if _, err := produce(m, p, -1, "a"); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with ISR {1} < 2: %v", err)
	}
	if leo := p.Log().LogEndOffset(); leo != 0 {
		t.Fatalf("refused produce appended (log end %d)", leo)
	}
	if _, err := produce(m, p, 1, "b"); err != nil {
		t.Fatalf("acks=1: %v", err)
	}

	// Waiting with ISR {1,2}; the ISR shrinks to {1} before the HW passes the record.
	m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 0, 1, []int32{1, 2, 3}, []int32{1, 2}, 2)}})
	pr, err := produce(m, p, -1, "c")
	if err != nil || pr.Part(0).settled {
		t.Fatalf("acks=all: %v", err)
	}
	m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 0, 2, []int32{1, 2, 3}, []int32{1}, 2)}})
	if pp := pr.Part(0); !pp.settled || !errors.Is(pp.Err, ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("after the shrink: settled %v, %v", pp.settled, pp.Err)
	}

	// Waiting with ISR {1,2}; replica 2 never fetches: REQUEST_TIMED_OUT.
	m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 0, 3, []int32{1, 2, 3}, []int32{1, 2}, 2)}})
	pr, _ = produce(m, p, -1, "d")
	clock.advance(999 * time.Millisecond)
	m.AdvanceClock()
	if pr.Part(0).settled {
		t.Fatal("timed out early")
	}
	clock.advance(2 * time.Millisecond)
	m.AdvanceClock()
	if pp := pr.Part(0); !pp.settled || !errors.Is(pp.Err, ErrTimeout) {
		t.Fatalf("after the timeout: settled %v, %v", pp.settled, pp.Err)
	}

	// Waiting; leadership moves away: NOT_LEADER_OR_FOLLOWER.
	pr, _ = produce(m, p, -1, "e")
	m.Apply(Delta{Followers: []PartitionState{stateOf(2, 1, 4, []int32{1, 2, 3}, []int32{1, 2}, 2)}})
	if pp := pr.Part(0); !pp.settled || !errors.Is(pp.Err, ErrNotLeader) {
		t.Fatalf("after losing leadership: settled %v, %v", pp.settled, pp.Err)
	}
	if _, err := produce(m, p, 1, "f"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("produce to a follower: %v", err)
	}
}

func TestApplyIgnoresStaleStatesAndStops(t *testing.T) {
	m, store, _ := newTestManager(t, false)
	m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 5, 7, []int32{1, 2}, []int32{1, 2}, 1)}})
	p := m.Partition(tp0())
	m.Apply(Delta{Followers: []PartitionState{stateOf(2, 4, 9, []int32{1, 2}, []int32{1, 2}, 1)}})
	if p.Role() != RoleLeader || p.LeaderEpoch() != 5 {
		t.Fatalf("a lower leader epoch was applied: %v %d", p.Role(), p.LeaderEpoch())
	}
	m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 5, 6, []int32{1, 2}, []int32{1}, 1)}})
	if st := p.State(); len(st.ISR) != 2 || st.PartitionEpoch != 7 {
		t.Fatalf("a lower partition epoch was applied: %+v", st)
	}
	m.Apply(Delta{Stopped: []Stop{{TP: tp0(), Delete: true}}})
	if m.Partition(tp0()) != nil || p.Role() != RoleStopped || store.log(tp0()) != nil {
		t.Fatal("stop with delete left the replica or its log")
	}
}

func TestBecomingLeaderCatchesUpTheHW(t *testing.T) {
	// A log recovered with HW < LEO (a restart) gets its HW to the LEO once durable,
	// as the single node did before replication (ISR = {self}).
	m, store, _ := newTestManager(t, true)
	l, _ := store.OpenLog(tp0(), engine.LogConfig{})
	for _, v := range []string{"a", "b"} {
		if _, err := l.Append(makeBatch(v), engine.AppendOptions{LeaderEpoch: 0}); err != nil {
			t.Fatal(err)
		}
	}
	m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 0, 0, []int32{1}, []int32{1}, 1)}})
	if hw := l.HighWatermark(); hw != 0 {
		t.Fatalf("HW %d before the data is durable", hw)
	}
	store.log(tp0()).flush()
	if hw := l.HighWatermark(); hw != 2 {
		t.Fatalf("HW %d after", hw)
	}
}

func TestShrinkProposal(t *testing.T) {
	m, _, clock := newTestManager(t, false)
	m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 0, 4, []int32{1, 2, 3}, []int32{1, 2, 3}, 1)}})
	p := m.Partition(tp0())
	produce(m, p, 1, "a")
	p.FollowerFetch(2, 1, 1, 0, 0, 17) // caught up
	p.FollowerFetch(3, 1, 0, 0, 0, 17) // behind
	clock.advance(1100 * time.Millisecond)
	p.FollowerFetch(2, 1, 1, 0, 0, 17)
	m.MaybeShrinkISR()
	req := m.TakeAlterPartition()
	if req == nil || len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 {
		t.Fatalf("no shrink proposed: %+v", req)
	}
	rp := req.Topics[0].Partitions[0]
	if rp.PartitionEpoch != 4 || len(rp.NewEpochISR) != 2 || rp.NewEpochISR[0].BrokerID != 1 || rp.NewEpochISR[1].BrokerID != 2 {
		t.Fatalf("proposal %+v", rp)
	}
	if st := p.State(); len(st.MaximalISR) != 3 {
		t.Fatalf("maximal ISR while pending: %v", st.MaximalISR)
	}
	if m.TakeAlterPartition() != nil {
		t.Fatal("a second request while one is in flight")
	}
	// No answer: sent again after the backoff.
	m.HandleAlterPartition(req, nil, errors.New("connection reset"))
	if m.TakeAlterPartition() != nil {
		t.Fatal("resent before the backoff")
	}
	clock.advance(time.Second)
	if m.TakeAlterPartition() == nil {
		t.Fatal("not resent after the backoff")
	}
}

// TestInSyncReplicaBelowHWLeavesAtOnce: an ISR member whose fetch falls below the HW
// (it cut a damaged range, or lost unsynced writes) is proposed out of the ISR at that
// fetch, not after replica.lag.time.max.ms.
func TestInSyncReplicaBelowHWLeavesAtOnce(t *testing.T) {
	m, _, _ := newTestManager(t, false)
	m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 0, 4, []int32{1, 2, 3}, []int32{1, 2, 3}, 1)}})
	p := m.Partition(tp0())
	produce(m, p, 1, "a")
	produce(m, p, 1, "b")
	p.FollowerFetch(2, 1, 2, 0, 0, 17)
	p.FollowerFetch(3, 1, 2, 0, 0, 17)
	if hw := p.Log().HighWatermark(); hw != 2 {
		t.Fatalf("HW %d", hw)
	}
	if m.TakeAlterPartition() != nil {
		t.Fatal("a proposal with every replica caught up")
	}
	p.FollowerFetch(3, 1, 1, 0, 0, 17) // replica 3 now holds only offset 0
	req := m.TakeAlterPartition()
	if req == nil {
		t.Fatal("no shrink proposed")
	}
	rp := req.Topics[0].Partitions[0]
	if len(rp.NewEpochISR) != 2 || rp.NewEpochISR[0].BrokerID != 1 || rp.NewEpochISR[1].BrokerID != 2 {
		t.Fatalf("proposal %+v", rp.NewEpochISR)
	}
	if hw := p.Log().HighWatermark(); hw != 2 {
		t.Fatalf("HW moved back to %d", hw)
	}
}

// TestReaddedReplicaStaleParkedFetch is the Manager side of
// TestSimReassignStaleParkedFetch, as net/kafka drives it: replica 3's long poll at the
// log end arrives (FollowerFetch), a reassignment removes replica 3 and another adds it
// back in the same leader epoch (its log deleted), replica 3 fetches from 0, and only
// then the parked fetch completes (FollowerReread, with its old offset). Nothing but
// the new fetch counts: no expansion is proposed and replica 3 is not in the maximal
// ISR; FollowerReread still refuses what FollowerFetch refuses.
func TestReaddedReplicaStaleParkedFetch(t *testing.T) {
	m, _, _ := newTestManager(t, false)
	if err := m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 4, 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 2)}}); err != nil {
		t.Fatal(err)
	}
	p := m.Partition(tp0())
	for _, v := range []string{"a", "b", "c"} {
		if _, err := produce(m, p, 1, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []int32{2, 3} {
		if _, err := p.FollowerFetch(r, 10+int64(r), 3, 4, 4, 17); err != nil { // the long poll arrives
			t.Fatal(err)
		}
	}
	if hw := p.Log().HighWatermark(); hw != 3 {
		t.Fatalf("HW %d", hw)
	}
	removed := stateOf(1, 4, 1, []int32{1, 2}, []int32{1, 2}, 2)
	if err := m.Apply(Delta{Leaders: []PartitionState{removed}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.FollowerReread(3, 13, 3, 4, 4, 17); !errors.Is(err, ErrUnknownReplica) {
		t.Fatalf("a removed replica's parked fetch: %v, want ErrUnknownReplica", err)
	}
	readded := stateOf(1, 4, 2, []int32{1, 2, 3}, []int32{1, 2}, 2)
	readded.Adding = []int32{3}
	if err := m.Apply(Delta{Leaders: []PartitionState{readded}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.FollowerFetch(3, 13, 0, -1, 4, 17); err != nil { // its new, empty log
		t.Fatal(err)
	}
	res, err := p.FollowerReread(3, 13, 3, 4, 4, 17) // the parked fetch completes
	if err != nil || res.HighWatermark != 3 || res.LogEndOffset != 3 {
		t.Fatalf("the parked fetch's answer: %+v, %v", res, err)
	}
	st := p.State()
	if st.PendingISR != nil || len(st.MaximalISR) != 2 {
		t.Fatalf("the parked fetch counted: pending %v, maximal ISR %v", st.PendingISR, st.MaximalISR)
	}
	if req := m.TakeAlterPartition(); req != nil {
		t.Fatalf("an expansion was proposed: %+v", req.Topics[0].Partitions)
	}
	// What FollowerFetch refuses, FollowerReread refuses.
	if _, err := p.FollowerReread(3, 13, 3, 4, 3, 17); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("an older leader epoch: %v", err)
	}
	if _, err := p.FollowerReread(3, 12, 3, 4, 4, 17); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("an older broker epoch: %v", err)
	}
	if _, err := p.FollowerReread(3, 13, 9, -1, 4, 17); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past the log end: %v", err)
	}
	// Its own fetches bring replica 3 in once it has caught up.
	if _, err := p.FollowerFetch(3, 13, 3, 4, 4, 17); err != nil {
		t.Fatal(err)
	}
	if req := m.TakeAlterPartition(); req == nil || len(req.Topics[0].Partitions[0].NewISR) != 3 {
		t.Fatalf("no expansion once replica 3 caught up: %+v", req)
	}
}

// TestReaddedReplicaFetchInFlightIsFenced: a fetch replica 3 sent at the log end before
// a reassignment removed it arrives only after another added it back (its log
// deleted). The removal named the same leader in a new leader epoch (the controller
// does so whenever replicas leave, as Kafka's), so the old fetch carries an older
// epoch and is refused with FENCED_LEADER_EPOCH: it neither counts for the HW nor
// brings replica 3 into the ISR. The follower that stayed re-fetches in the new epoch.
func TestReaddedReplicaFetchInFlightIsFenced(t *testing.T) {
	m, _, _ := newTestManager(t, false)
	if err := m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 4, 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 2)}}); err != nil {
		t.Fatal(err)
	}
	p := m.Partition(tp0())
	for _, v := range []string{"a", "b", "c"} {
		if _, err := produce(m, p, 1, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []int32{2, 3} {
		if _, err := p.FollowerFetch(r, 10+int64(r), 3, 4, 4, 17); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 5, 1, []int32{1, 2}, []int32{1, 2}, 2)}}); err != nil {
		t.Fatal(err)
	}
	readded := stateOf(1, 5, 2, []int32{1, 2, 3}, []int32{1, 2}, 2)
	readded.Adding = []int32{3}
	if err := m.Apply(Delta{Leaders: []PartitionState{readded}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.FollowerFetch(3, 13, 3, 4, 4, 17); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("replica 3's fetch of the old epoch: %v, want ErrFencedLeaderEpoch", err)
	}
	if st := p.State(); st.PendingISR != nil || len(st.MaximalISR) != 2 {
		t.Fatalf("the old fetch counted: pending %v, maximal ISR %v", st.PendingISR, st.MaximalISR)
	}
	if req := m.TakeAlterPartition(); req != nil {
		t.Fatalf("an expansion was proposed: %+v", req.Topics[0].Partitions)
	}
	if _, err := p.FollowerFetch(3, 13, 0, -1, 5, 17); err != nil { // its new, empty log
		t.Fatal(err)
	}
	if req := m.TakeAlterPartition(); req != nil {
		t.Fatalf("an expansion was proposed for an empty replica: %+v", req.Topics[0].Partitions)
	}
	if _, err := p.FollowerFetch(2, 12, 3, 4, 5, 17); err != nil {
		t.Fatal(err)
	}
	if hw := p.Log().HighWatermark(); hw != 3 {
		t.Fatalf("HW %d after the remaining follower's fetch in the new epoch", hw)
	}
}
