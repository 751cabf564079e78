package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// keyedRecord is one record read back: its offset, key and value (nil: a tombstone).
type keyedRecord struct {
	offset     int64
	key, value string
	tombstone  bool
}

// readKeyed reads partition 0 of topic from its start with isolation level iso until
// the record with key "end" (the last one written).
func readKeyed(ctx context.Context, bootstrap, topic string, iso kgo.IsolationLevel) ([]keyedRecord, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out []keyedRecord
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("reading %s: the end record not reached (%d records)", topic, len(out))
		}
		if err := fs.Err(); err != nil {
			return out, err
		}
		end := false
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, keyedRecord{offset: r.Offset, key: string(r.Key), value: string(r.Value), tombstone: r.Value == nil})
			end = end || string(r.Key) == "end"
		})
		if end {
			return out, nil
		}
	}
}

// TestProcCompaction: a compacted topic with small segments, keys overwritten many
// times, tombstones, a committed and an aborted transaction; once the cleaner ran
// (log.cleaner.backoff.ms short), a consumer reading from the start sees the last
// value of every key at its original offset, the tombstones, the committed
// transaction's values and none of the aborted one's (read_committed).
func TestProcCompaction(t *testing.T) {
	c := startProcCluster(t, specWith(combined(1), map[string]string{
		"log.cleaner.backoff.ms":               "50",
		"transaction.state.log.num.partitions": "1",
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bootstrap := c.Bootstrap()
	const topic = "compacted"
	str := func(s string) *string { return &s }
	if err := createTopic(ctx, c.Node(1).Client, topic, 1, 1, map[string]*string{
		"cleanup.policy":            str("compact"),
		"segment.bytes":             str("1024"),
		"min.cleanable.dirty.ratio": str("0.01"),
	}); err != nil {
		t.Fatal(err)
	}
	plain := client(t, bootstrap, kgo.DefaultProduceTopic(topic))
	offsets := map[string]int64{} // the offset of each key's last write
	// produce writes the records of keys[i] = values[i] (nil: a tombstone) in one go
	// and remembers each key's offset.
	produce := func(cl *kgo.Client, keys []string, values []*string) {
		t.Helper()
		var rs []*kgo.Record
		for i, k := range keys {
			r := &kgo.Record{Key: []byte(k)}
			if values[i] != nil {
				r.Value = []byte(*values[i])
			}
			rs = append(rs, r)
		}
		for _, res := range cl.ProduceSync(ctx, rs...) {
			if res.Err != nil {
				t.Fatalf("produce %s: %v", res.Record.Key, res.Err)
			}
			offsets[string(res.Record.Key)] = max(offsets[string(res.Record.Key)], res.Record.Offset)
		}
	}
	round := func(r, from, to int) {
		var keys []string
		var values []*string
		for k := from; k < to; k++ {
			keys = append(keys, fmt.Sprintf("k%d", k))
			values = append(values, str(fmt.Sprintf("k%d-r%d", k, r)))
		}
		produce(plain, keys, values)
	}
	for r := range 20 {
		round(r, 0, 10)
	}
	produce(plain, []string{"k0", "k1"}, []*string{nil, nil})

	txn := client(t, bootstrap, kgo.DefaultProduceTopic(topic), kgo.TransactionalID("compact-txn"))
	lastPlain := map[string]int64{"k3": offsets["k3"], "k5": offsets["k5"]}
	for _, tr := range []struct {
		commit bool
		keys   []string
		value  string
	}{{true, []string{"k2", "k4"}, "txn-commit"}, {false, []string{"k3", "k5"}, "txn-abort"}} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, k := range tr.keys {
			produce(txn, []string{k}, []*string{str(k + "-" + tr.value)})
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(tr.commit)); err != nil {
			t.Fatal(err)
		}
	}
	offsets["k3"], offsets["k5"] = lastPlain["k3"], lastPlain["k5"] // their aborted writes do not count
	for r := 20; r < 40; r++ {
		round(r, 6, 10)
	}
	produce(plain, []string{"end"}, []*string{str("end")})
	written := offsets["end"] + 1

	// The cleaner compacts every segment but the active one: from ~290 records a few
	// dozen stay (the active segment's tail is not cleaned).
	var recs []keyedRecord
	eventually(t, 30*time.Second, "the cleaner to compact "+topic, func() error {
		var err error
		if recs, err = readKeyed(ctx, bootstrap, topic, kgo.ReadUncommitted()); err != nil {
			return err
		}
		if len(recs) > 40 {
			return fmt.Errorf("%d records of %d written", len(recs), written)
		}
		return nil
	})
	t.Logf("%d records of %d written remain", len(recs), written)

	recs, err := readKeyed(ctx, bootstrap, topic, kgo.ReadCommitted())
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]keyedRecord{}
	prev := int64(-1)
	for _, r := range recs {
		if r.offset <= prev {
			t.Fatalf("offsets out of order: %d after %d", r.offset, prev)
		}
		prev = r.offset
		if strings.HasSuffix(r.value, "txn-abort") {
			t.Fatalf("read_committed saw an aborted record at %d: %s", r.offset, r.value)
		}
		last[r.key] = r
	}
	want := map[string]string{"k2": "k2-txn-commit", "k4": "k4-txn-commit", "k3": "k3-r19", "k5": "k5-r19", "end": "end"}
	for k := 6; k < 10; k++ {
		want[fmt.Sprintf("k%d", k)] = fmt.Sprintf("k%d-r39", k)
	}
	for k, v := range want {
		r, ok := last[k]
		if !ok || r.tombstone || r.value != v || r.offset != offsets[k] {
			t.Errorf("key %s: last %+v (present %v), want %q at offset %d", k, r, ok, v, offsets[k])
		}
	}
	for _, k := range []string{"k0", "k1"} {
		// delete.retention.ms (a day) keeps the tombstone.
		if r, ok := last[k]; !ok || !r.tombstone || r.offset != offsets[k] {
			t.Errorf("key %s: last %+v (present %v), want its tombstone at %d", k, r, ok, offsets[k])
		}
	}
}
