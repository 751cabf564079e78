//go:build samsa_faults

package replication

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// The planted bugs (faults_on.go) must be caught: by the scenario written for them
// and by the random simulation. Run with: go test -tags samsa_faults ./replication

func runCaught(t *testing.T, name string, cfg simConfig, scenario func(*script)) string {
	t.Helper()
	var caught string
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(errScriptStopped); !ok {
					panic(r)
				}
			}
		}()
		s := newScript(t, cfg)
		s.onFail = func(msg string) { caught = msg }
		scenario(s)
	}()
	if caught == "" {
		t.Fatalf("%s: the planted bug went unnoticed", name)
	}
	t.Logf("%s caught: %.300s", name, caught)
	return caught
}

func TestFaultAckBeforeISRIsCaught(t *testing.T) {
	t.Setenv("SAMSA_FAULT_ACK_BEFORE_ISR", "1")
	runCaught(t, "ackWaitsForTheISR", scriptConfig(3, 3, 2, true), ackWaitsForTheISR)
	randomCatches(t)
}

func TestFaultFencedLeaderAcksIsCaught(t *testing.T) {
	t.Setenv("SAMSA_FAULT_FENCED_LEADER_ACKS", "1")
	runCaught(t, "fencedLeaderNeverAcks", scriptConfig(3, 3, 2, false), fencedLeaderNeverAcks)
	randomCatches(t)
}

// randomCatches runs random seeds until one finds a violation.
func randomCatches(t *testing.T) {
	t.Helper()
	for seed := range uint64(300) {
		if _, faults := runSeed(t, seed); len(faults) > 0 {
			t.Logf("random seed %d caught it: %.200s", seed, faults[0])
			return
		}
	}
	t.Fatal("300 random seeds missed the planted bug")
}

func TestFaultSwitchesLogged(t *testing.T) {
	t.Setenv("SAMSA_FAULT_ACK_BEFORE_ISR", "1")
	var buf bytes.Buffer
	m, err := NewManager(Config{NodeID: 1, Logs: newMemStore(false), Manual: true,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if out := buf.String(); !strings.Contains(out, `msg="fault switches active"`) || !strings.Contains(out, "switches=SAMSA_FAULT_ACK_BEFORE_ISR") {
		t.Fatalf("log: %s", out)
	}
}

// TestFaultEarlyISRJoinProposesABehindReplica: with the switch on, a follower outside
// the ISR that fetches below the HW is proposed in; without it, it is not (the fault
// harness's isr-behind-hw is the end-to-end check).
func TestFaultEarlyISRJoinProposesABehindReplica(t *testing.T) {
	for _, on := range []bool{false, true} {
		if on {
			t.Setenv("SAMSA_FAULT_EARLY_ISR_JOIN", "1")
		}
		m, _, _ := newTestManager(t, false)
		if err := m.Apply(Delta{Leaders: []PartitionState{stateOf(1, 4, 0, []int32{1, 2, 3}, []int32{1, 2}, 2)}}); err != nil {
			t.Fatal(err)
		}
		p := m.Partition(tp0())
		for _, v := range []string{"a", "b", "c"} {
			if _, err := produce(m, p, 1, v); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := p.FollowerFetch(2, 12, 3, 4, 4, 17); err != nil {
			t.Fatal(err)
		}
		if hw := p.Log().HighWatermark(); hw != 3 {
			t.Fatalf("HW %d", hw)
		}
		m.TakeAlterPartition()                                         // nothing to take; clear any
		if _, err := p.FollowerFetch(3, 13, 1, 4, 4, 17); err != nil { // replica 3 two records behind
			t.Fatal(err)
		}
		req := m.TakeAlterPartition()
		if proposed := req != nil && len(req.Topics[0].Partitions[0].NewISR) == 3; proposed != on {
			t.Fatalf("switch %v: replica 3 behind the HW proposed into the ISR: %v", on, proposed)
		}
	}
}
