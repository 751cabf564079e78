package replication

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// simSeeds is how many random seeds TestSimulation runs: SAMSA_SIM_SEEDS, else 3000
// with SAMSA_LONG=1, else 200 (200 under -short too: each seed takes milliseconds).
func simSeeds() int {
	if v, err := strconv.Atoi(os.Getenv("SAMSA_SIM_SEEDS")); err == nil && v > 0 {
		return v
	}
	if os.Getenv("SAMSA_LONG") == "1" {
		return 3000
	}
	return 200
}

// TestSimulation runs the random simulation over many seeds (from SAMSA_SIM_FROM, 0 by
// default). SAMSA_SIM_SEED=n runs seed n alone (SAMSA_SIM_TRACE=lines for a longer
// trace); a failing seed prints its replay command.
func TestSimulation(t *testing.T) {
	if v := os.Getenv("SAMSA_SIM_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SAMSA_SIM_SEED=%q: %v", v, err)
		}
		t.Run("seed="+v, func(t *testing.T) {
			s, _ := runSeed(t, seed)
			reportSim(t, s, "seed "+v)
		})
		return
	}
	n := simSeeds()
	from, _ := strconv.ParseUint(os.Getenv("SAMSA_SIM_FROM"), 10, 64) // first seed (0)
	start := time.Now()
	events := 0
	for seed := from; seed < from+uint64(n); seed++ {
		name := "seed=" + strconv.FormatUint(seed, 10)
		t.Run(name, func(t *testing.T) {
			s, _ := runSeed(t, seed)
			events += s.events
			reportSim(t, s, name)
		})
		if t.Failed() {
			break
		}
	}
	t.Logf("%d seeds, %d events, %v", n, events, time.Since(start))
}

// TestSimulationDeterministic runs one seed twice: the same events, the same trace.
func TestSimulationDeterministic(t *testing.T) {
	a, _ := runSeed(t, 7)
	b, _ := runSeed(t, 7)
	if a.events != b.events || a.traceText() != b.traceText() || a.values != b.values {
		t.Fatalf("seed 7 ran differently: %d vs %d events, %d vs %d values", a.events, b.events, a.values, b.values)
	}
}
