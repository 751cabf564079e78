package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A transactional produce is answered with the offsets its records take in the
// log: a read_committed consumer reads each committed record at the offset its
// producer was told, across transactions whose markers take offsets of their own.
func TestTxnProduceOffsets(t *testing.T) {
	tb := txnTestBroker(t)
	mustCreate(t, tb.admin(t), "txoffs", 2, nil)
	cl := tb.client(t, kgo.TransactionalID("txoffs-1"), kgo.DefaultProduceTopic("txoffs"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := testCtx(t)
	acked := map[string]int64{}
	n := 0
	for txn := range 6 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := range 1 + 2*(txn%3) {
			recs = append(recs, &kgo.Record{Partition: int32((txn + i/2) % 2), Value: fmt.Appendf(nil, "v%d-%d", txn, i)})
		}
		for _, r := range cl.ProduceSync(ctx, recs...) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if txn%3 != 2 {
				acked[string(r.Record.Value)] = r.Record.Offset
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(txn%3 != 2)); err != nil {
			t.Fatal(err)
		}
		if txn%3 != 2 {
			n += len(recs)
		}
	}
	cons := tb.client(t, kgo.ConsumeTopics("txoffs"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			want, ok := acked[string(r.Value)]
			if !ok {
				t.Errorf("read %s (p%d@%d), not a committed record", r.Value, r.Partition, r.Offset)
			} else if want != r.Offset {
				t.Errorf("%s: acknowledged at offset %d, read at %d (p%d)", r.Value, want, r.Offset, r.Partition)
			}
		})
	}
}
