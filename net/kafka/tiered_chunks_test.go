package kafka

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/internal/s3test"
)

// Records read from remote storage go on the wire from the chunks' own
// buffers, which are read into again for later chunks once the chunk cache
// has dropped them and no answer holds them (replication/tiered's
// chunkBuf). With a cache of two 64 KiB chunks and a chunk read ahead, the
// three partitions of each fetch evict each other's chunks while the
// answers that splice them are built and written: every record reads back
// as produced, from offset 0 on.
func TestRemoteFetchReusedChunkBuffers(t *testing.T) {
	g := s3test.Start(t)
	g.MakeBucket(t, "tiered")
	static := tieredStatic(g, "tiered")
	static["rsm.config.chunk.size"] = "65536"
	static["rsm.config.fetch.chunk.cache.class"] = "io.aiven.kafka.tieredstorage.fetch.cache.MemoryChunkCache"
	static["rsm.config.fetch.chunk.cache.size"] = "131072"
	static["rsm.config.fetch.chunk.cache.prefetch.max.size"] = "65536"
	reg := prometheus.NewRegistry()
	tb := startTestBroker(t, testBrokerOptions{Sync: engine.SyncNone, Static: static, Registerer: reg})
	ctx := testCtx(t)
	cl := tb.client(t, kgo.DefaultProduceTopic("reuse"), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(32<<10))
	seg, local, ret := "262144", "0", "-1"
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, map[string]*string{"remote.storage.enable": ptr("true"), "segment.bytes": &seg,
		"local.retention.bytes": &local, "retention.ms": &ret}, "reuse"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	const perPartition = 1500 // 1 KiB each: about 6 segments
	value := func(p int32, i int) []byte { return bytes.Repeat([]byte{byte(i*7 + int(p))}, 1000) }
	for i := range perPartition {
		for p := range int32(3) {
			cl.Produce(ctx, &kgo.Record{Partition: p, Key: []byte(strconv.Itoa(i)), Value: value(p, i)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		el := tb.eng.Log(engine.TopicPartition{Topic: "reuse", Partition: p})
		eventually(t, 30*time.Second, fmt.Sprintf("reuse-%d's copies and local deletions", p), func() bool { return el.LogStartOffset() >= perPartition/2 })
	}
	// One Fetch of the three partitions at a time, 256 KiB of each: four to
	// five chunks a partition through a cache of two.
	raw := tb.raw(t)
	var next [3]int64
	for fetches := 0; next != [3]int64{perPartition, perPartition, perPartition}; fetches++ {
		var parts []fetchPartReq
		for p := range int32(3) {
			parts = append(parts, fetchPartReq{topic: "reuse", partition: p, offset: next[p], maxBytes: 256 << 10, curEpoch: -1, lastEpoch: -1})
		}
		resp := raw.roundTrip(fetchReq(12, 0, 1, 0, -1, parts, nil)).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 || fetches > 100 {
			t.Fatalf("fetch %d at %v: error %d, %d topics", fetches, next, resp.ErrorCode, len(resp.Topics))
		}
		for _, rp := range resp.Topics[0].Partitions {
			p := rp.Partition
			err := engine.ForEachRecordInBatches(rp.RecordBatches, func(r engine.Record) error {
				i := int(next[p])
				if r.Offset != next[p] || string(r.Key) != strconv.Itoa(i) || !bytes.Equal(r.Value, value(p, i)) {
					return fmt.Errorf("record %d: offset %d, key %q, %d bytes of value, %q...", i, r.Offset, r.Key, len(r.Value), r.Value[:min(8, len(r.Value))])
				}
				next[p]++
				return nil
			})
			if rp.ErrorCode != 0 || err != nil {
				t.Fatalf("fetch %d, partition %d: error %d, %v", fetches, p, rp.ErrorCode, err)
			}
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	for _, mf := range mfs {
		for _, c := range mf.GetMetric() {
			m[mf.GetName()] += c.GetCounter().GetValue()
		}
	}
	if fetched, evicted := m["samsa_remote_fetch_bytes_total"], m["samsa_remote_chunk_cache_evictions_total"]; fetched < 3*perPartition/2*1000 || evicted < 20 {
		t.Fatalf("%.0f bytes read from remote storage, %.0f chunks evicted: want half the records and chunks evicted", fetched, evicted)
	} else {
		t.Logf("%.0f bytes read from remote storage, %.0f chunks evicted", fetched, evicted)
	}
}
