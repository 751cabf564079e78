package workload

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestWorkloadAgainstKfake runs the workload for a moment against franz-go's
// in-process Kafka (kfake, no faults) and checks that what it recorded is a complete,
// valid history: every send acknowledged and read by every reader, commits made, the
// final drain complete.
func TestWorkloadAgainstKfake(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "chaos"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	start := time.Now()
	hist, err := chaos.CreateHistory(path, chaos.Header{Topic: "chaos", Partitions: 3, Seed: 3, Nodes: 1}, start)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := Start(ctx, Config{Brokers: kc.ListenAddrs(), Topic: "chaos", Partitions: 3, Producers: 2, Rate: 400,
		GroupConsumers: 2, AssignedConsumers: 1, Seed: 3, History: hist})
	if err != nil {
		t.Fatal(err)
	}
	// Let it run until at least 300 values are acknowledged.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for w.Progress().Acked < 300 {
		select {
		case <-ctx.Done():
			t.Fatalf("only %d acknowledged", w.Progress().Acked)
		case <-tick.C:
		}
	}
	w.StopProducers(5 * time.Second)
	for !w.CaughtUp() {
		select {
		case <-ctx.Done():
			t.Fatalf("readers never caught up: %+v", w.Progress())
		case <-tick.C:
		}
	}
	w.StopConsumers()
	end := map[int32]int64{}
	for p := int32(0); p < 3; p++ {
		end[p] = 0
	}
	// The end offsets are one past the highest acknowledged offsets.
	w.mu.Lock()
	for p, o := range w.mu.maxAcked {
		end[p] = o + 1
	}
	w.mu.Unlock()
	if err := w.FinalDrain(ctx, end); err != nil {
		t.Fatal(err)
	}
	if err := hist.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := chaos.ReadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	res := chaos.Check(h, chaos.Options{Liveness: 20 * time.Second})
	if !res.Valid {
		t.Fatalf("workload against kfake: %s: %+v", res.Summary(), res.Anomalies)
	}
	st := res.Stats
	if st.Acked < 300 || st.Acked != st.Sends || st.AckedRead != st.Acked || st.CommitsOK == 0 {
		t.Errorf("stats %+v", st)
	}
	procs := map[string]bool{}
	for _, op := range h.Ops {
		if op.F == chaos.FPoll {
			procs[op.Proc] = true
			// Every record was written by an idempotent producer, which the
			// readers record with it (the checker's duplicate causes).
			if len(op.Prods) != len(op.Recs) {
				t.Fatalf("poll with %d records and %d producers: %+v", len(op.Recs), len(op.Prods), op)
			}
			for _, pr := range op.Prods {
				var id, epoch int64
				if n, err := fmt.Sscanf(pr, "%d/%d", &id, &epoch); n != 2 || err != nil || id < 0 {
					t.Fatalf("record producer %q", pr)
				}
			}
		}
		if op.F == chaos.FSend && op.Status == chaos.OK && (op.End < op.Start || op.Wall == 0) {
			t.Fatalf("send without times: %+v", op)
		}
	}
	for _, p := range []string{"a0", chaos.ProcFinal} {
		if !procs[p] {
			t.Errorf("no poll by %s", p)
		}
	}
	if !procs["g0"] && !procs["g1"] {
		t.Error("no group member polled")
	}
}
