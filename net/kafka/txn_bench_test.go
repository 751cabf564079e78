package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-broker/samsa/engine"
)

// BenchmarkTxnThroughput: transactions of 100 records of 1 KiB over 4 partitions
// against one node with fdatasync (the broker default), each one begun, produced,
// flushed and committed before the next (kgo over loopback); beside the same 100
// records with idempotence only, flushed per hundred. One op is 100 records; the
// difference is what a transaction costs: AddPartitionsToTxn, EndTxn, the
// coordinator's two log writes and the markers.
//
//	go test -run XXX -bench TxnThroughput -benchmem -count 6 ./net/kafka | benchstat -
func BenchmarkTxnThroughput(b *testing.B) {
	const perTxn, size, parts = 100, 1024, 4
	for _, mode := range []string{"idempotent", "transactional"} {
		b.Run(mode, func(b *testing.B) {
			tb := startTestBroker(b, testBrokerOptions{Sync: engine.SyncFsync, Static: map[string]string{
				"transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "1",
			}})
			mustCreate(b, tb.admin(b), "txbench", parts, nil)
			opts := []kgo.Opt{kgo.DefaultProduceTopic("txbench"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0)}
			if mode == "transactional" {
				opts = append(opts, kgo.TransactionalID("txbench-1"))
			}
			cl := tb.client(b, opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			recs := make([]*kgo.Record, perTxn)
			value := make([]byte, size)
			one := func() {
				if mode == "transactional" {
					if err := cl.BeginTransaction(); err != nil {
						b.Fatal(err)
					}
				}
				for i := range recs {
					recs[i] = &kgo.Record{Partition: int32(i % parts), Value: value}
				}
				if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					b.Fatal(err)
				}
				if mode == "transactional" {
					if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
						b.Fatal(err)
					}
				}
			}
			one() // the producer id, the coordinator, the connections
			b.SetBytes(perTxn * size)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				one()
			}
			el := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)/el, "txn/s")
			b.ReportMetric(float64(b.N*perTxn)/el, "records/s")
		})
	}
}
