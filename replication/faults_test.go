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
