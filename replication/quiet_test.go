package replication

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestQuietFollowerStaysCaughtUp: a follower whose fetches leave an unchanged partition
// out (FollowerQuiet) is caught up as of its latest fetch: after an append that its
// next fetch has not yet reached, it stays in the ISR for replica.lag.time.max.ms from
// that fetch, as it would had each fetch been recorded. When its fetches stop (the
// clock no longer moves), it leaves the ISR after the lag, as before.
func TestQuietFollowerStaysCaughtUp(t *testing.T) {
	m, _, clock := newTestManager(t, false)
	m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 0, 4, []int32{1, 2, 3}, []int32{1, 2, 3}, 1)}})
	p := m.Partition(tp0())
	produce(m, p, 1, "a")
	var c2, c3 atomic.Int64
	for _, r := range []int32{2, 3} {
		if _, err := p.FollowerFetch(r, 1, 1, 0, 0, 17); err != nil {
			t.Fatal(err)
		}
	}
	if p.FollowerQuiet(2, 0, &c2) {
		t.Fatal("quiet below the log end")
	}
	if !p.FollowerQuiet(2, 1, &c2) || !p.FollowerQuiet(3, 1, &c3) {
		t.Fatal("not quiet at the log end")
	}
	// Replica 2 keeps fetching (its session's clock moves), replica 3 stops.
	for range 5 {
		clock.advance(500 * time.Millisecond)
		c2.Store(clock.Now().UnixNano())
	}
	produce(m, p, 1, "b") // the log end moves past both
	m.MaybeShrinkISR()
	req := m.TakeAlterPartition()
	if req == nil {
		t.Fatal("the follower that stopped fetching is not proposed out")
	}
	isr := req.Topics[0].Partitions[0].NewEpochISR
	if len(isr) != 2 || isr[0].BrokerID != 1 || isr[1].BrokerID != 2 {
		t.Fatalf("proposed ISR %+v, want [1 2]", isr)
	}
	// Its next fetch is recorded: the quiet fetches count as caught up at offset 1.
	if _, err := p.FollowerFetch(2, 1, 1, 0, 0, 17); err != nil {
		t.Fatal(err)
	}
	p.hwMu.Lock()
	f := p.followers[0]
	p.hwMu.Unlock()
	if f.id != 2 || f.quiet != nil || !f.lastCaughtUp.Equal(clock.Now()) || !f.lastFetch.Equal(clock.Now()) {
		t.Fatalf("after a recorded fetch: %+v, want caught up at %v", f, clock.Now())
	}
}

// TestFollowerQuietRefusals: no quiet state for a follower outside the ISR (its fetches
// must keep proposing it), nor for one whose recorded fetch is not the one named.
func TestFollowerQuietRefusals(t *testing.T) {
	m, _, _ := newTestManager(t, false)
	m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 0, 4, []int32{1, 2, 3}, []int32{1, 2}, 1)}})
	p := m.Partition(tp0())
	produce(m, p, 1, "a")
	var c atomic.Int64
	if p.FollowerQuiet(2, 1, &c) {
		t.Fatal("quiet without a recorded fetch at the log end")
	}
	p.FollowerFetch(2, 1, 1, 0, 0, 17)
	if !p.FollowerQuiet(2, 1, &c) {
		t.Fatal("an ISR member at the log end is not quiet")
	}
	p.FollowerAwake(2, &c)
	p.hwMu.Lock()
	q := p.followers[0].quiet
	p.hwMu.Unlock()
	if q != nil {
		t.Fatal("still quiet after FollowerAwake")
	}
	p.FollowerFetch(3, 1, 1, 0, 0, 17) // proposes replica 3 into the ISR
	if p.FollowerQuiet(3, 1, &c) {
		t.Fatal("quiet outside the ISR")
	}
}
