package workload

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestTxnWorkloadAgainstKfake runs the transactional workload alone for a moment
// against franz-go's in-process Kafka (no faults): transactions commit and abort,
// a copier's consume-transform-produce transactions commit, the read_committed
// consumers and the final drain read, and the history checks valid with every
// committed record read, nothing aborted seen and no G0 or G1c cycle.
func TestTxnWorkloadAgainstKfake(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "chaos", "chaos-txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	hist, err := chaos.CreateHistory(path, chaos.Header{Topic: "chaos", Partitions: 3, Seed: 5, Nodes: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := Start(ctx, Config{Brokers: kc.ListenAddrs(), Topic: "chaos", Partitions: 3, Producers: 1, Rate: 50,
		TxnTopic: "chaos-txn", TxnPartitions: 3, TxnProducers: 2, TxnConsumers: 1, TxnRate: 100,
		TxnCopiers: 1, TxnCopyRate: 20, Seed: 5, History: hist})
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for pr := w.Progress(); pr.Committed < 40 || pr.Aborted < 5 || pr.TxnRead == 0 || pr.Copied < 5; pr = w.Progress() {
		select {
		case <-ctx.Done():
			t.Fatalf("progress: %+v", pr)
		case <-tick.C:
		}
	}
	w.StopProducers(5 * time.Second)
	w.StopConsumers()
	if err := w.FinalTxnDrain(ctx, nil); err != nil {
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
	st := res.Txn
	for _, a := range res.Anomalies {
		switch a.Kind {
		case chaos.KAbortedRead, chaos.KTxnLost, chaos.KTxnPartial, chaos.KPhantom, chaos.KG0, chaos.KG1c:
			t.Errorf("%s: %s %s", a.Kind, a.Value, a.Detail)
		}
	}
	if !st.Drained || st.Committed < 40 || st.Aborted < 5 || st.Unknown != 0 || st.Reads == 0 {
		t.Fatalf("transactional stats %+v", st)
	}
	if g := st.Graph; g.Readers < 5 || g.WR < 5 || g.WW == 0 || g.Txns != st.Committed {
		t.Fatalf("transaction graph %+v", g)
	}
	t.Logf("transactions %+v", st)
}
