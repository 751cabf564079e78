package replication

import (
	"strings"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/internal/invariants"
)

// mustPanic runs f and fails unless it panics with a message holding want (the
// name of the invariant broken).
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic; want one naming %q", want)
		}
		if msg, _ := r.(string); !strings.Contains(msg, want) {
			t.Fatalf("panic %v; want one naming %q", r, want)
		}
	}()
	f()
}

// TestCheckISRWithinReplicas: the check an invariants build runs at each change of
// the assignment passes an ISR within the replicas (empty included) and panics,
// naming the invariant, at a member that is not a replica.
func TestCheckISRWithinReplicas(t *testing.T) {
	p := newPartition(nil, tp0(), [16]byte{1}, newMemLog(tp0(), false))
	p.replicas = []int32{1, 2, 3}
	for _, isr := range [][]int32{nil, {1}, {3, 1}, {1, 2, 3}} {
		p.isr = isr
		p.checkISRLocked()
	}
	p.isr = []int32{1, 4}
	mustPanic(t, "ISR ⊆ replicas", p.checkISRLocked)
}

// hwLog is a memory log whose high watermark is set by the test, past its end if
// need be.
type hwLog struct {
	*memLog
	hw int64
}

func (l *hwLog) HighWatermark() int64 { return l.hw }

// TestCheckHWBelowLEO: the check behind the invariants tag after the leader moves
// its high watermark passes HW ≤ LEO and panics, naming the invariant, past it.
func TestCheckHWBelowLEO(t *testing.T) {
	ml := newMemLog(tp0(), false)
	if _, err := ml.Append(makeBatch("a"), engine.AppendOptions{LeaderEpoch: 0}); err != nil {
		t.Fatal(err)
	}
	l := &hwLog{memLog: ml}
	p := newPartition(nil, tp0(), [16]byte{1}, l)
	for _, hw := range []int64{0, 1} {
		l.hw = hw
		p.checkHW("test")
	}
	l.hw = 2
	mustPanic(t, "HW ≤ LEO", func() { p.checkHW("test") })
}

// TestISRInvariantOnApply: an invariants build refuses, by a panic naming the
// invariant, a leader state whose ISR holds a replica that is not assigned; the
// ordinary build applies it as it is.
func TestISRInvariantOnApply(t *testing.T) {
	// No Close: in an invariants build the panic leaves the partition's lock held.
	m, err := NewManager(Config{NodeID: 1, Logs: newMemStore(false), Clock: newFakeClock(), Manual: true, ReplicaLagTimeMax: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	bad := stateOf(1, 0, 0, []int32{1, 2}, []int32{1, 3}, 1)
	apply := func() { _ = m.Apply(Delta{Leaders: []PartitionState{bad}}) }
	if !invariants.Enabled {
		apply()
		if isr := m.Partition(tp0()).State().ISR; len(isr) != 2 || isr[1] != 3 {
			t.Fatalf("ISR %v; want [1 3] applied as it is", isr)
		}
		m.Close()
		return
	}
	mustPanic(t, "ISR ⊆ replicas", apply)
}
