package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// FuzzProduceRecords hands arbitrary bytes to the produce path of a real log: it must
// answer an error code or append, never panic, and never leave the log inconsistent
// (offsets dense, every appended batch readable).
func FuzzProduceRecords(f *testing.F) {
	tb := startDataBroker(f)
	if _, err := tb.admin(f).CreateTopic(context.Background(), 1, 1, nil, "fuzz"); err != nil {
		f.Fatal(err)
	}
	good := appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 3, valueBytes: 5})
	f.Add(good)
	f.Add(appendBatch(append([]byte{}, good...), batchSpec{pid: 7, epoch: 0, seq: 0, n: 2}))
	f.Add(good[:40])
	f.Add([]byte{})
	magic1 := append([]byte{}, good...)
	magic1[16] = 1
	f.Add(magic1)
	f.Fuzz(func(t *testing.T, records []byte) {
		rt := &kmsg.ProduceRequestTopic{Topic: "fuzz"}
		rp := &kmsg.ProduceRequestTopicPartition{Records: append([]byte{}, records...)}
		l := tb.log("fuzz", 0)
		before := l.LogEndOffset()
		op := produceOps.Get().(*produceOp)
		op.noAnswer = true
		if op.fin == nil {
			op.fin = op.finish
		}
		op.pr.Begin(tb.b.repl, 1, time.Second, op.fin)
		kerr := tb.b.produce.producePartition(op, 9, rt, rp, &kmsg.ProduceResponseTopicPartition{})
		var res engine.AppendResult
		if kerr == nil {
			res = op.pr.Part(op.pr.Len() - 1).Result
		}
		op.pr.Seal() // durable at once (SyncNone): answers nothing, recycles the op
		after := l.LogEndOffset()
		if kerr != nil {
			if after != before {
				t.Fatalf("refused (%v) but the log end moved %d -> %d", kerr, before, after)
			}
			return
		}
		if res.Duplicate {
			return
		}
		if res.BaseOffset != before || res.LastOffset != after-1 {
			t.Fatalf("appended %d..%d, log end %d -> %d", res.BaseOffset, res.LastOffset, before, after)
		}
		if hw := l.HighWatermark(); hw != after {
			t.Fatalf("HW %d after the append, log end %d", hw, after)
		}
		if _, err := l.ReadCopy(before, 1<<20, after, true, nil); err != nil {
			t.Fatalf("reading back: %v", err)
		}
	})
}
