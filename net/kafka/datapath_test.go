package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// startDataBroker is startTestBroker plus the data path's clean-up.
func startDataBroker(t testing.TB, opts ...testBrokerOptions) *testBroker {
	t.Helper()
	tb := startTestBroker(t, opts...)
	t.Cleanup(func() {
		if tb.b != nil {
			tb.a.CloseDataPath()
		}
	})
	return tb
}

// produceSync produces n records "<prefix>-<i>" to topic and fails the test on error.
func produceSync(t *testing.T, cl *kgo.Client, topic string, p int32, prefix string, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: p, Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeN consumes records from topic until it has n of them or the deadline passes.
func consumeN(t *testing.T, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", len(out), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func TestProduceConsumeEveryCodec(t *testing.T) {
	tb := startDataBroker(t)
	adm := tb.admin(t)
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			mustCreate(t, adm, topic, 2, nil)
			prod := tb.client(t, kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			const n = 500
			produceSync(t, prod, topic, 0, name, n)
			produceSync(t, prod, topic, 1, name, 10)
			cons := tb.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(16<<10))
			recs := consumeN(t, cons, n+10)
			seen := map[int32]int64{}
			for _, r := range recs {
				want := seen[r.Partition]
				if r.Offset != want {
					t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, want)
				}
				if r.Partition == 0 && string(r.Value) != fmt.Sprintf("%s-%d", name, r.Offset) {
					t.Fatalf("offset %d: value %q", r.Offset, r.Value)
				}
				seen[r.Partition] = want + 1
			}
			if seen[0] != n || seen[1] != 10 {
				t.Fatalf("consumed %v", seen)
			}
		})
	}
}

// TestProduceAcksAndFsync produces with every acks setting under the fsync policy: the
// HW (what the consumer sees) only covers durable data.
func TestProduceAcksAndFsync(t *testing.T) {
	tb := startDataBroker(t, testBrokerOptions{Sync: engine.SyncFsync})
	mustCreate(t, tb.admin(t), "acks", 1, nil)
	total := 0
	for _, acks := range []kgo.Acks{kgo.AllISRAcks(), kgo.LeaderAck(), kgo.NoAck()} {
		opts := []kgo.Opt{kgo.RequiredAcks(acks)}
		if acks == kgo.NoAck() || acks == kgo.LeaderAck() {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl := tb.client(t, opts...)
		produceSync(t, cl, "acks", 0, "a", 100)
		total += 100
	}
	cons := tb.client(t, kgo.ConsumeTopics("acks"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	consumeN(t, cons, total)
	l := tb.log("acks", 0)
	if l.RecoveryPoint() < l.HighWatermark() {
		t.Fatalf("HW %d above the durable point %d", l.HighWatermark(), l.RecoveryPoint())
	}
}

// TestIdempotentRetriesNoDuplicates produces with idempotence through many concurrent
// producers and small, pipelined batches, and checks every record is there once.
func TestIdempotentRetriesNoDuplicates(t *testing.T) {
	tb := startDataBroker(t, testBrokerOptions{Sync: engine.SyncFsync})
	mustCreate(t, tb.admin(t), "idem", 3, nil)
	const producers, per = 4, 300
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for i := range producers {
		cl := tb.client(t, kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(512))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range per {
				r := &kgo.Record{Topic: "idem", Value: []byte(fmt.Sprintf("%d-%d", i, j))}
				cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
					if err != nil {
						errs <- err
					}
				})
			}
			if err := cl.Flush(context.Background()); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cons := tb.client(t, kgo.ConsumeTopics("idem"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	recs := consumeN(t, cons, producers*per)
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[string(r.Value)] {
			t.Fatalf("duplicate %q", r.Value)
		}
		seen[string(r.Value)] = true
	}
	if len(seen) != producers*per {
		t.Fatalf("%d distinct records, want %d", len(seen), producers*per)
	}
}

func TestListOffsetsByTimestamp(t *testing.T) {
	tb := startDataBroker(t)
	adm := tb.admin(t)
	mustCreate(t, adm, "times", 1, nil)
	cl := tb.client(t, kgo.ProducerLinger(0))
	base := time.UnixMilli(1_700_000_000_000)
	for i := range 10 {
		r := &kgo.Record{Topic: "times", Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testCtx(t)
	check := func(what string, l kadm.ListedOffsets, wantOff int64) {
		t.Helper()
		o, ok := l.Lookup("times", 0)
		if !ok || o.Err != nil || o.Offset != wantOff {
			t.Fatalf("%s: %+v (ok %v), want offset %d", what, o, ok, wantOff)
		}
	}
	l, err := adm.ListStartOffsets(ctx, "times")
	if err != nil {
		t.Fatal(err)
	}
	check("start", l, 0)
	if l, err = adm.ListEndOffsets(ctx, "times"); err != nil {
		t.Fatal(err)
	}
	check("end", l, 10)
	if l, err = adm.ListOffsetsAfterMilli(ctx, base.Add(3500*time.Millisecond).UnixMilli(), "times"); err != nil {
		t.Fatal(err)
	}
	check("after 3.5s", l, 4)
	if l, err = adm.ListOffsetsAfterMilli(ctx, base.Add(time.Hour).UnixMilli(), "times"); err != nil {
		t.Fatal(err)
	}
	check("after the last", l, 10) // kadm maps "none" (-1) to the end offset
	if l, err = adm.ListMaxTimestampOffsets(ctx, "times"); err != nil {
		t.Fatal(err)
	}
	check("max timestamp", l, 9)
	o, _ := l.Lookup("times", 0)
	if o.Timestamp != base.Add(9*time.Second).UnixMilli() || o.LeaderEpoch != 0 {
		t.Fatalf("max timestamp: %+v", o)
	}
}

// TestListOffsetsMaxTimestampInABatch: ListOffsets MAX_TIMESTAMP answers the offset of
// the record with the largest timestamp, not the last offset of its batch (Kafka 3.7.0's
// KAFKA-16310, which clients' tests check), in an uncompressed and in a compressed
// batch; of several records with that timestamp, the first.
func TestListOffsetsMaxTimestampInABatch(t *testing.T) {
	tb := startDataBroker(t)
	adm := tb.admin(t)
	base := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		topic string
		codec kgo.CompressionCodec
	}{{"maxts-plain", kgo.NoCompression()}, {"maxts-zstd", kgo.ZstdCompression()}} {
		mustCreate(t, adm, tc.topic, 1, nil)
		// One batch (linger, one partition) of five records; the largest timestamp is
		// carried by offsets 1 and 3.
		cl := tb.client(t, kgo.ProducerBatchCompression(tc.codec), kgo.ProducerLinger(time.Second), kgo.DefaultProduceTopic(tc.topic))
		var recs []*kgo.Record
		for _, ms := range []int{0, 900, 100, 900, 200} {
			recs = append(recs, &kgo.Record{Value: []byte("v"), Timestamp: base.Add(time.Duration(ms) * time.Millisecond)})
		}
		if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		l, err := adm.ListMaxTimestampOffsets(testCtx(t), tc.topic)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := l.Lookup(tc.topic, 0)
		if !ok || o.Err != nil || o.Offset != 1 || o.Timestamp != base.Add(900*time.Millisecond).UnixMilli() {
			t.Fatalf("%s: max timestamp %+v (ok %v), want offset 1 at +900 ms", tc.topic, o, ok)
		}
	}
}

func TestDeleteRecordsAndOffsetOutOfRange(t *testing.T) {
	tb := startDataBroker(t)
	adm := tb.admin(t)
	mustCreate(t, adm, "trim", 1, nil)
	cl := tb.client(t)
	produceSync(t, cl, "trim", 0, "x", 20)
	ctx := testCtx(t)
	res, err := adm.DeleteRecords(ctx, kadm.Offsets{"trim": {0: {At: 7}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup("trim", 0); r.Err != nil || r.LowWatermark != 7 {
		t.Fatalf("delete records: %+v", r)
	}
	res, _ = adm.DeleteRecords(ctx, kadm.Offsets{"trim": {0: {At: 100}}})
	if r, _ := res.Lookup("trim", 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("beyond HW: %+v", r)
	}
	if l, _ := adm.ListStartOffsets(ctx, "trim"); l["trim"][0].Offset != 7 {
		t.Fatalf("start offset after delete: %+v", l["trim"][0])
	}
	// A consumer at 3 is out of range; with reset to start it lands on 7.
	cons := tb.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"trim": {0: kgo.NewOffset().At(3)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	recs := consumeN(t, cons, 13)
	if recs[0].Offset != 7 {
		t.Fatalf("first offset after reset: %d", recs[0].Offset)
	}
}

func TestDescribeLogDirs(t *testing.T) {
	tb := startDataBroker(t)
	adm := tb.admin(t)
	mustCreate(t, adm, "dirs", 2, nil)
	produceSync(t, tb.client(t), "dirs", 1, "d", 10)
	all, err := adm.DescribeAllLogDirs(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	all.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			t.Fatalf("dir %s: %v", d.Dir, d.Err)
		}
		if p, ok := d.Topics["dirs"][1]; ok {
			found = p.Size > 0 && p.OffsetLag == 0
		}
		if d.TotalBytes <= 0 || d.UsableBytes <= 0 {
			t.Fatalf("space %d/%d", d.UsableBytes, d.TotalBytes)
		}
	})
	if !found {
		t.Fatalf("partition dirs/1 not described with data: %+v", all)
	}
}

// Produce and Fetch are decoded from the frame into requests pooled with their ops. A
// truncated body closes the connection and the broker keeps serving; a field that an
// older version lacks (Produce's transactional id before v3) does not survive from the
// request an op served before.
func TestPooledDecodeMalformedAndReuse(t *testing.T) {
	tb := startDataBroker(t)
	rc := tb.raw(t)
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "pool", 1, 1
	creq := kmsg.NewPtrCreateTopicsRequest()
	creq.Topics = append(creq.Topics, ct)
	if resp := rc.roundTrip(creq).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
	batch := appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 3, valueBytes: 10})
	preq := produceReq("pool", 1, batch)
	preq.SetVersion(9)
	freq := fetchReq(12, 0, 1, 0, -1, []fetchPartReq{{topic: "pool", curEpoch: -1, lastEpoch: -1}}, nil)
	for _, req := range []kmsg.Request{preq, freq} {
		frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("t")).AppendRequest(nil, req, 1)
		hdr := 4 + 2 + 2 + 4 + 2 + len("t") + 1 // size, key, version, correlation, client id, tags
		for _, cut := range []int{hdr, hdr + 1, hdr + 7, len(frame) - len(batch)/2, len(frame) - 1} {
			if cut >= len(frame) {
				continue
			}
			f := append([]byte(nil), frame[:cut]...)
			binary.BigEndian.PutUint32(f, uint32(cut-4))
			bad := tb.raw(t)
			bad.write(f)
			bad.expectClosed()
		}
	}

	txn := produceReq("pool", 1, batch)
	txn.SetVersion(3)
	id := "txn"
	txn.TransactionID = &id
	plain := produceReq("pool", 1, batch)
	plain.SetVersion(2)
	for range 3 {
		got := rc.roundTrip(txn).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		// A transactional id with a batch that is not transactional: appended, as by
		// Kafka (the id matters only to transactional batches).
		if got.ErrorCode != 0 {
			t.Fatalf("transactional produce: %v", kerr.ErrorForCode(got.ErrorCode))
		}
		if got := rc.roundTrip(plain).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; got.ErrorCode != 0 {
			t.Fatalf("v2 produce after a transactional one: %v", kerr.ErrorForCode(got.ErrorCode))
		}
	}
	// Six batches of three records: the transactional id's and the plain ones.
	resp := rc.roundTrip(freq).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(batchesIn(t, p.RecordBatches)) != 18 {
		t.Fatalf("fetch: %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
	}
}
