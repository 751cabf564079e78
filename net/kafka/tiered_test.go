package kafka

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/internal/s3test"
)

// Tiered storage end to end, over TCP with franz-go, against a broker with
// remote.log.storage.system.enable and a real S3-compatible server
// (versitygw): a topic with remote.storage.enable and local.retention.bytes
// 0 gets many segments' worth of records; the remote log manager copies the
// sealed segments and local retention deletes them; ListOffsets tells the
// whole log's start (-2) from the local one (-4), the last copied offset
// (-5) and the first pending upload (-6); a consumer from offset 0 reads
// every record once, in order, the older ones from remote storage.
func TestTieredStorageEndToEnd(t *testing.T) {
	g := s3test.Start(t)
	g.MakeBucket(t, "tiered")
	tb := startTestBroker(t, testBrokerOptions{Sync: engine.SyncNone, Static: map[string]string{
		"remote.log.storage.system.enable":                     "true",
		"remote.log.manager.task.interval.ms":                  "100",
		"rsm.config.storage.s3.bucket.name":                    "tiered",
		"rsm.config.storage.s3.region":                         "us-east-1",
		"rsm.config.storage.s3.endpoint.url":                   g.Endpoint,
		"rsm.config.storage.s3.path.style.access.enabled":      "true",
		"rsm.config.storage.aws.access.key.id":                 g.Access,
		"rsm.config.storage.aws.secret.access.key":             g.Secret,
		"rsm.config.chunk.size":                                "4194304",
		"rlmm.config.remote.log.metadata.topic.num.partitions": "5",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.DefaultProduceTopic("tiered"), kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(200))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	seg, local, ret := "16384", "0", "-1"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": ptr("true"), "segment.bytes": &seg,
		"local.retention.bytes": &local, "retention.ms": &ret}, "tiered"); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	value := make([]byte, 200)
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// The copies, then the local deletions: the local log start passes most of the log.
	el := tb.eng.Log(engine.TopicPartition{Topic: "tiered", Partition: 0})
	deadline := time.Now().Add(30 * time.Second)
	for el.LogStartOffset() < n/2 {
		if time.Now().After(deadline) {
			t.Fatalf("local log start %d after 30 s, remote end %d", el.LogStartOffset(), el.RemoteEnd())
		}
		time.Sleep(50 * time.Millisecond)
	}
	offsets := func(ts int64) int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(11)
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "tiered"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("ListOffsets %d: error %d", ts, p.ErrorCode)
		}
		return p.Offset
	}
	earliest, earliestLocal, latestTiered, pending := offsets(-2), offsets(-4), offsets(-5), offsets(-6)
	t.Logf("earliest %d, earliest local %d, latest tiered %d, earliest pending upload %d, end %d", earliest, earliestLocal, latestTiered, pending, el.HighWatermark())
	if earliest != 0 || earliestLocal < n/2 || latestTiered < earliestLocal-1 || pending != latestTiered+1 {
		t.Fatalf("earliest %d, earliest local %d, latest tiered %d, earliest pending upload %d", earliest, earliestLocal, latestTiered, pending)
	}

	// A consumer from offset 0 reads every record once, in order.
	cons, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tiered": {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(32<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	next := 0
	for next < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", next, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) != strconv.Itoa(next) || r.Offset != int64(next) {
				t.Fatalf("record %d: key %s at offset %d", next, r.Key, r.Offset)
			}
			next++
		})
	}
	if fs := cons.PollRecords(shortCtx(t), 10); fs.NumRecords() != 0 {
		t.Fatalf("%d records past the end", fs.NumRecords())
	}
}

func ptr(s string) *string { return &s }

func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}
