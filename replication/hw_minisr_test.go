package replication

import (
	"errors"
	"testing"
)

func strict(st PartitionState) PartitionState { st.StrictMinISR = true; return st }

// TestHighWatermarkStrictMinISR: with eligible leader replicas (StrictMinISR) the
// leader moves its HW only while the committed ISR holds min.insync.replicas members
// (capped at the replicas), so that a replica that leaves a smaller ISR holds every
// committed record; without it (Kafka's classic rule) the HW follows the ISR it has.
func TestHighWatermarkStrictMinISR(t *testing.T) {
	for _, on := range []bool{true, false} {
		m, _, _ := newTestManager(t, false)
		state := func(pe int32, isr ...int32) PartitionState {
			st := stateOf(1, 0, pe, []int32{1, 2, 3}, isr, 2)
			st.StrictMinISR = on
			return st
		}
		if err := m.Apply(Delta{Leaders: []PartitionState{state(0, 1, 2)}}); err != nil {
			t.Fatal(err)
		}
		p := m.Partition(tp0())
		produce(m, p, 1, "a")
		if res, _ := p.FollowerFetch(2, 5, 1, 0, 0, 17); res.HighWatermark != 1 {
			t.Fatalf("strict %v: HW %d with the ISR at min.insync.replicas", on, res.HighWatermark)
		}
		// The ISR shrinks below min.insync.replicas: 2 is out (an ELR member).
		if err := m.Apply(Delta{Leaders: []PartitionState{state(1, 1)}}); err != nil {
			t.Fatal(err)
		}
		produce(m, p, 1, "b")
		want := int64(2)
		if on {
			want = 1
		}
		if hw := p.Log().HighWatermark(); hw != want {
			t.Fatalf("strict %v: HW %d under min.insync.replicas, want %d", on, hw, want)
		}
		// A follower out of the ISR that catches up is proposed back in, but until the
		// expansion commits the ISR is still under min.insync.replicas.
		if res, _ := p.FollowerFetch(2, 5, 2, 0, 0, 17); res.HighWatermark != want {
			t.Fatalf("strict %v: HW %d after 2 caught up, before the expansion committed", on, res.HighWatermark)
		}
		if st := p.State(); st.StrictMinISR != on || len(st.PendingISR) != 2 {
			t.Fatalf("strict %v: state %+v", on, st)
		}
		if _, err := produce(m, p, -1, "c"); !errors.Is(err, ErrNotEnoughReplicas) {
			t.Fatalf("strict %v: acks=all under min.insync.replicas: %v", on, err)
		}
		// The expansion commits: the HW moves to what both hold.
		if err := m.Apply(Delta{Leaders: []PartitionState{state(2, 1, 2)}}); err != nil {
			t.Fatal(err)
		}
		if hw := p.Log().HighWatermark(); hw != 2 {
			t.Fatalf("strict %v: HW %d once the ISR is back at min.insync.replicas", on, hw)
		}
	}
}

// TestHighWatermarkStrictMinISRCapped: min.insync.replicas above the replication
// factor counts as the replication factor (Kafka's effectiveMinIsr); turning the rule
// off (eligible.leader.replicas.version back to 0) moves a held HW at once.
func TestHighWatermarkStrictMinISRCapped(t *testing.T) {
	m, _, _ := newTestManager(t, false)
	if err := m.Apply(Delta{Leaders: []PartitionState{strict(stateOf(1, 0, 0, []int32{1, 2}, []int32{1, 2}, 3))}}); err != nil {
		t.Fatal(err)
	}
	p := m.Partition(tp0())
	produce(m, p, 1, "a")
	if res, _ := p.FollowerFetch(2, 5, 1, 0, 0, 17); res.HighWatermark != 1 {
		t.Fatalf("HW %d with every replica in the ISR and min.insync.replicas 3 of 2", res.HighWatermark)
	}
	if err := m.Apply(Delta{Leaders: []PartitionState{strict(stateOf(1, 0, 1, []int32{1, 2}, []int32{1}, 3))}}); err != nil {
		t.Fatal(err)
	}
	produce(m, p, 1, "b")
	if hw := p.Log().HighWatermark(); hw != 1 {
		t.Fatalf("HW %d under min.insync.replicas", hw)
	}
	// The same state with the rule off: the HW moves when the state is applied.
	if err := m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 0, 1, []int32{1, 2}, []int32{1}, 3)}}); err != nil {
		t.Fatal(err)
	}
	if hw := p.Log().HighWatermark(); hw != 2 {
		t.Fatalf("HW %d after the rule went off", hw)
	}
}
