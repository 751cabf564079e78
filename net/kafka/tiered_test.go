package kafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/remotelog"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/engine/remote"
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
	reg := prometheus.NewRegistry()
	tb := startTestBroker(t, testBrokerOptions{Sync: engine.SyncNone, Registerer: reg, Static: map[string]string{
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
	// Uncompressed, so that a search by timestamp answers the record, not its batch; batches
	// well under segment.bytes.
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.DefaultProduceTopic("tiered"), kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(200), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(8<<10))
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
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value, Timestamp: base.Add(time.Duration(i) * time.Millisecond)}, func(_ *kgo.Record, err error) {
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
	// The copy task runs on meanwhile: -5 and -6 are read again until no copy
	// finished between them.
	var earliest, earliestLocal, latestTiered, pending int64
	for try := 0; try < 50; try++ {
		earliest, earliestLocal, latestTiered, pending = offsets(-2), offsets(-4), offsets(-5), offsets(-6)
		if offsets(-5) == latestTiered && offsets(-4) == earliestLocal {
			break
		}
	}
	t.Logf("earliest %d, earliest local %d, latest tiered %d, earliest pending upload %d, end %d", earliest, earliestLocal, latestTiered, pending, el.HighWatermark())
	if earliest != 0 || earliestLocal < n/2 || latestTiered < earliestLocal-1 || pending != latestTiered+1 {
		t.Fatalf("earliest %d, earliest local %d, latest tiered %d, earliest pending upload %d", earliest, earliestLocal, latestTiered, pending)
	}
	// By timestamp: record i was stamped base + i ms, in remote storage or local.
	for _, i := range []int64{17, earliestLocal - 1, earliestLocal, n - 1} {
		if got := offsets(base.Add(time.Duration(i) * time.Millisecond).UnixMilli()); got != i {
			t.Fatalf("ListOffsets for record %d's timestamp: %d", i, got)
		}
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

	// The metrics of the copies and the reads.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "samsa_remote_") {
			for _, m := range mf.GetMetric() {
				got[mf.GetName()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	t.Logf("metrics: %v", got)
	if got["samsa_remote_copy_bytes_total"] == 0 || got["samsa_remote_fetch_bytes_total"] == 0 || got["samsa_remote_log_size_bytes"] == 0 ||
		got["samsa_remote_copy_errors_total"] != 0 || got["samsa_remote_fetch_errors_total"] != 0 {
		t.Fatalf("tiered storage metrics: %v", got)
	}

	// DeleteRecords below the local log start: the whole log's start moves there.
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "tiered", Partition: 0, At: 100})
	dr, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("tiered", 0); r.Err != nil || r.LowWatermark != 100 {
		t.Fatalf("DeleteRecords to 100: %+v", r)
	}
	if got, local := offsets(-2), offsets(-4); got != 100 || local < earliestLocal {
		t.Fatalf("after DeleteRecords to 100: earliest %d, earliest local %d", got, local)
	}
}

func ptr(s string) *string { return &s }

func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// tieredStatic are the broker keys of tiered storage over gateway g's bucket.
func tieredStatic(g *s3test.Gateway, bucket string) map[string]string {
	return map[string]string{
		"remote.log.storage.system.enable":                     "true",
		"remote.log.manager.task.interval.ms":                  "100",
		"rsm.config.storage.s3.bucket.name":                    bucket,
		"rsm.config.storage.s3.region":                         "us-east-1",
		"rsm.config.storage.s3.endpoint.url":                   g.Endpoint,
		"rsm.config.storage.s3.path.style.access.enabled":      "true",
		"rsm.config.storage.aws.access.key.id":                 g.Access,
		"rsm.config.storage.aws.secret.access.key":             g.Secret,
		"rsm.config.chunk.size":                                "4194304",
		"rlmm.config.remote.log.metadata.topic.num.partitions": "3",
	}
}

// copiedStarts lists the start offsets of the segments copied to the bucket
// (the .log objects under g's root).
func copiedStarts(t *testing.T, g *s3test.Gateway, bucket string) []int64 {
	t.Helper()
	var out []int64
	err := filepath.WalkDir(filepath.Join(g.Root, bucket), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".log") {
			return err
		}
		start, err := strconv.ParseInt(strings.SplitN(filepath.Base(p), "-", 2)[0], 10, 64)
		if err != nil {
			return err
		}
		out = append(out, start)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// Tiered storage on three brokers sharing one bucket: the leader of a
// replicated tiered topic copies its segments (recording them in
// __remote_log_metadata, at that partition's leader wherever it is), the
// followers delete their copied segments too; the leader dies, the new one
// knows what its predecessor copied and copies only what follows; the dead
// broker comes back wiped and fetches only the local part; a consumer reads
// every record from offset 0 once, in order.
func TestClusterTieredStorageFailover(t *testing.T) {
	g := s3test.Start(t)
	g.MakeBucket(t, "tiered")
	static := tieredStatic(g, "tiered")
	static["replica.lag.time.max.ms"] = "30000"
	c := startCluster(t, static)
	ctx := testCtx(t)
	cl := clusterClient(t, c, kgo.DefaultProduceTopic("tc"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(200))
	seg, local, ret := "16384", "0", "-1"
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, map[string]*string{"remote.storage.enable": ptr("true"), "segment.bytes": &seg,
		"local.retention.bytes": &local, "retention.ms": &ret}, "tc"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	value := make([]byte, 200)
	produceWith := func(cl *kgo.Client, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce %d: %v", i, err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce := func(from, to int) { produceWith(cl, from, to) }
	const early, first, second = 10, 2000, 1000
	// An idempotent producer that writes only the first records: its state is in
	// the copies' producer snapshots, and nowhere in the local logs once they go.
	earlyCl := clusterClient(t, c, kgo.DefaultProduceTopic("tc"), kgo.RequiredAcks(kgo.AllISRAcks()))
	produceWith(earlyCl, 0, early)
	earlyCl.Close()
	produce(early, first)
	_, im := c.brokers[0].follower.Image()
	tt, _ := im.Topic("tc")
	leaderID := tt.Partitions[0].Leader
	var leader *clusterBroker
	var others []*clusterBroker
	for _, b := range c.brokers {
		if b.id == leaderID {
			leader = b
		} else {
			others = append(others, b)
		}
	}
	tp := engine.TopicPartition{Topic: "tc", Partition: 0}
	eventually(t, 30*time.Second, "the leader's copies and local deletions", func() bool {
		return leader.eng.Log(tp).LogStartOffset() >= first/2
	})
	copiedBefore := leader.eng.Log(tp).RemoteEnd()
	startsBefore := copiedStarts(t, g, "tiered")
	mp := remotelog.MetadataPartition(remote.TopicIDPartition{TopicID: remote.Uuid(tt.ID), Topic: "tc", Partition: 0}, 3)
	_, im = c.brokers[0].follower.Image() // the metadata topic is created with the first tiered partition
	mt, ok := im.Topic(remotelog.Topic)
	if !ok {
		t.Fatalf("no %s topic once copies are made", remotelog.Topic)
	}
	t.Logf("tc-0 led by broker %d, its metadata in %s-%d led by broker %d", leaderID, remotelog.Topic, mp, mt.Partitions[mp].Leader)
	for _, b := range others {
		eventually(t, 30*time.Second, fmt.Sprintf("broker %d, a follower, to delete what the leader copied", b.id), func() bool {
			return b.eng.Log(tp).LogStartOffset() > 0
		})
	}
	leader.stop()

	produce(first, first+second)
	var newLeader *clusterBroker
	eventually(t, 30*time.Second, "a new leader's copies past its predecessor's", func() bool {
		for _, b := range others {
			if el := b.eng.Log(tp); el.RemoteEnd() > first {
				newLeader = b
				return true
			}
		}
		return false
	})
	starts := copiedStarts(t, g, "tiered")
	for i := 1; i < len(starts); i++ {
		if starts[i] == starts[i-1] {
			t.Fatalf("the segment at %d was copied twice (copies start at %v)", starts[i], starts)
		}
	}
	// Nothing the first leader copied was copied again: besides its copies, at
	// most one starts below its end (the new leader's segment holding that end,
	// its own segments rolled elsewhere), and past its last copy's start.
	var extra []int64
	for _, s := range starts {
		if s < copiedBefore && !slices.Contains(startsBefore, s) {
			extra = append(extra, s)
		}
	}
	if len(extra) > 1 || len(extra) == 1 && extra[0] <= startsBefore[len(startsBefore)-1] {
		t.Fatalf("copies before the failover start at %v, after it at %v: copied again below %d", startsBefore, starts, copiedBefore)
	}
	t.Logf("broker %d copied up to %d, then died; broker %d copied on to %d; %d copies in the bucket", leaderID, copiedBefore, newLeader.id,
		newLeader.eng.Log(tp).RemoteEnd(), len(starts))

	// The dead broker comes back wiped (an empty log directory): it fetches from the
	// new leader's local log start, not from 0, and is back in the ISR.
	voters := map[int32]string{}
	for _, v := range c.voters {
		voters[v.id] = v.addr
	}
	wiped := startClusterBroker(t, leaderID, voters, static)
	eventually(t, 30*time.Second, "the wiped broker back in the ISR", func() bool {
		_, im := newLeader.follower.Image()
		ti, ok := im.Topic("tc")
		return ok && slices.Contains(ti.Partitions[0].ISR, leaderID) && wiped.eng.Log(tp) != nil
	})
	wl := wiped.eng.Log(tp)
	t.Logf("the wiped broker's log: from %d to %d (%d bytes); the leader's from %d", wl.LogStartOffset(), wl.LogEndOffset(), wl.Size(),
		newLeader.eng.Log(tp).LogStartOffset())
	if wl.LogStartOffset() < copiedBefore {
		t.Fatalf("the wiped broker copied from %d, below what was in remote storage already (%d)", wl.LogStartOffset(), copiedBefore)
	}
	// It knows the early producer, from the copy before its log start.
	var earlyPID int64 = -1
	for _, pi := range newLeader.eng.Log(tp).Producers() {
		if pi.LastSequence == early-1 {
			earlyPID = pi.ProducerID
		}
	}
	if earlyPID < 0 {
		t.Fatalf("the leader does not know the early producer: %+v", newLeader.eng.Log(tp).Producers())
	}
	if _, seq, ok := wl.ProducerState(earlyPID); !ok || seq != early-1 {
		t.Fatalf("the wiped broker's state of the early producer %d: last sequence %d (%v), want %d", earlyPID, seq, ok, early-1)
	}

	var live []string
	for _, b := range others {
		live = append(live, b.addr)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(live...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tc": {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(32<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	next := 0
	for next < first+second {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", next, first+second, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) != strconv.Itoa(next) || r.Offset != int64(next) {
				t.Fatalf("record %d: key %s at offset %d", next, r.Key, r.Offset)
			}
			next++
		})
	}
}

// Tiered storage on four brokers with __remote_log_metadata at replication
// factor 1 over three partitions: some broker holds no replica of the
// metadata partition of a tiered partition it leads, and reads it from that
// partition's leader (remotelog.Config.Fetch) as it appends to it there. The
// partition led there copies its segments, deletes them locally, reads them
// back from remote storage, and deletes the oldest copies by retention.bytes.
func TestClusterTieredStorageWithoutMetadataReplica(t *testing.T) {
	g := s3test.Start(t)
	g.MakeBucket(t, "tiered")
	static := tieredStatic(g, "tiered")
	static["rlmm.config.remote.log.metadata.topic.replication.factor"] = "1"
	c := startCluster(t, static)
	voters := map[int32]string{}
	for _, v := range c.voters {
		voters[v.id] = v.addr
	}
	c.brokers = append(c.brokers, startClusterBroker(t, 4, voters, static))
	for _, b := range c.brokers {
		eventually(t, 10*time.Second, fmt.Sprintf("broker %d's image to show four unfenced brokers", b.id), func() bool {
			_, im := b.b.Image()
			return len(im.UnfencedBrokers()) == 4
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Uncompressed batches well under segment.bytes: some 30 segments.
	cl := clusterClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(200), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(8<<10))
	// tc-i on broker i+1 alone: whichever broker holds no metadata replica leads one.
	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "tc", -1, -1
	for i := range int32(4) {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = i, []int32{i + 1}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	for k, v := range map[string]string{"remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "0", "retention.ms": "-1"} {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	create.Topics = append(create.Topics, rt)
	if r, err := create.RequestWith(ctx, cl); err != nil || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v %+v", err, r)
	}
	// The remote log managers create the metadata topic on meeting tc.
	var part int32 = -1
	var leader *clusterBroker
	eventually(t, 20*time.Second, fmt.Sprintf("%s and tc in the images", remotelog.Topic), func() bool {
		_, im := c.brokers[0].follower.Image()
		mt, ok1 := im.Topic(remotelog.Topic)
		tt, ok2 := im.Topic("tc")
		if !ok1 || !ok2 || len(tt.Partitions) != 4 {
			return false
		}
		for i := range int32(4) {
			mp := remotelog.MetadataPartition(remote.TopicIDPartition{TopicID: remote.Uuid(tt.ID), Topic: "tc", Partition: i}, int32(len(mt.Partitions)))
			if !slices.Contains(mt.Partitions[mp].Replicas, i+1) {
				part, leader = i, c.brokers[i]
				t.Logf("tc-%d led by broker %d; its metadata in %s-%d on broker %v", i, i+1, remotelog.Topic, mp, mt.Partitions[mp].Replicas)
				return true
			}
		}
		t.Fatalf("every tc-i's leader holds its metadata partition: %+v", mt.Partitions)
		return false
	})
	if leader.id != part+1 {
		t.Fatalf("brokers out of order: %d at %d", leader.id, part)
	}

	const n = 2000
	value := make([]byte, 200)
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: "tc", Partition: part, Key: []byte(strconv.Itoa(i)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %d: %v", i, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	tp := engine.TopicPartition{Topic: "tc", Partition: part}
	el := leader.eng.Log(tp)
	eventually(t, 30*time.Second, "the leader's copies and local deletions", func() bool {
		return el.LogStartOffset() >= n/2
	})
	copies := len(copiedStarts(t, g, "tiered"))
	t.Logf("copied up to %d, local log from %d, %d copies %v", el.RemoteEnd(), el.LogStartOffset(), copies, copiedStarts(t, g, "tiered"))

	consume := func(from int64) {
		t.Helper()
		cons, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tc": {part: kgo.NewOffset().At(from)}}),
			kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(32<<10))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		for next := from; next < n; {
			fs := cons.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consumed from %d up to %d of %d: %v", from, next, n, err)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
			fs.EachRecord(func(r *kgo.Record) {
				if string(r.Key) != strconv.FormatInt(next, 10) || r.Offset != next {
					t.Fatalf("record %d: key %s at offset %d", next, r.Key, r.Offset)
				}
				next++
			})
		}
	}
	consume(0)

	// Remote retention: the oldest copies go, recorded through the metadata
	// partition's leader; the log starts after them.
	adm := kadm.NewClient(cl)
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: ptr("200000")}}, "tc"); err != nil || rs[0].Err != nil {
		t.Fatalf("retention.bytes: %v %v", err, rs)
	}
	// A task deletes copies one by one: the start is read until it stays put
	// for five task intervals.
	var start, last int64
	var since time.Time
	eventually(t, 30*time.Second, "remote retention to delete the oldest copies", func() bool {
		lo, err := adm.ListStartOffsets(ctx, "tc")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := lo.Lookup("tc", part)
		starts := copiedStarts(t, g, "tiered")
		if start = o.Offset; o.Err != nil || start == 0 || len(starts) == 0 || starts[0] != start {
			return false
		}
		if start != last {
			last, since = start, time.Now()
		}
		return time.Since(since) > 500*time.Millisecond
	})
	t.Logf("after retention: log start %d, %d copies (%d before)", start, len(copiedStarts(t, g, "tiered")), copies)
	consume(start)
}

// remote.fetch.max.wait.ms (Kafka's DelayedRemoteFetch): with the object store
// hung (its process stopped), a fetch of a partition below its local log start
// and of another partition is answered within about remote.fetch.max.wait.ms,
// with the other partition's records and the hung one empty, without an error,
// as Kafka's expiry answers. Once the store answers again the read went on and
// a fetch gets the records.
func TestRemoteFetchMaxWait(t *testing.T) {
	g := s3test.Start(t)
	g.MakeBucket(t, "tiered")
	static := tieredStatic(g, "tiered")
	static["remote.fetch.max.wait.ms"] = "300"
	static["rsm.config.storage.s3.api.call.attempt.timeout"] = "20000"
	tb := startTestBroker(t, testBrokerOptions{Static: static})
	ctx := testCtx(t)
	cl := tb.client(t, kgo.DefaultProduceTopic("rw"), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(200),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(8<<10))
	seg, local, ret := "16384", "0", "-1"
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, map[string]*string{"remote.storage.enable": ptr("true"), "segment.bytes": &seg,
		"local.retention.bytes": &local, "retention.ms": &ret}, "rw"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	value := make([]byte, 200)
	for i := range 1000 {
		part := int32(0)
		if i%100 == 0 {
			part = 1 // 10 records, in partition 1's active segment
		}
		cl.Produce(ctx, &kgo.Record{Partition: part, Key: []byte(strconv.Itoa(i)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	el := tb.eng.Log(engine.TopicPartition{Topic: "rw", Partition: 0})
	eventually(t, 30*time.Second, "rw-0's copies and local deletions", func() bool { return el.LogStartOffset() >= 300 })

	parts := []fetchPartReq{{topic: "rw", partition: 0, curEpoch: -1, lastEpoch: -1}, {topic: "rw", partition: 1, curEpoch: -1, lastEpoch: -1}}
	g.Pause(t)
	start := time.Now()
	resp := tb.raw(t).roundTrip(fetchReq(12, 5000, 1, 0, -1, parts, nil)).(*kmsg.FetchResponse)
	took := time.Since(start)
	t.Logf("a fetch with the store hung answered in %v", took)
	rp := resp.Topics[0].Partitions
	if took < 250*time.Millisecond || took > 3*time.Second {
		t.Fatalf("a fetch with the store hung answered in %v, want about remote.fetch.max.wait.ms (300 ms): local start %d, p0 error %d, %d bytes", took, el.LogStartOffset(), rp[0].ErrorCode, len(rp[0].RecordBatches))
	}
	if len(rp) != 2 || rp[0].ErrorCode != 0 || len(rp[0].RecordBatches) != 0 || rp[1].ErrorCode != 0 || len(batchesIn(t, rp[1].RecordBatches)) != 10 {
		t.Fatalf("with the store hung: %+v", rp)
	}

	g.Resume(t)
	eventually(t, 30*time.Second, "a fetch below the local log start to read once the store answers", func() bool {
		resp := tb.raw(t).roundTrip(fetchReq(12, 0, 1, 0, -1, parts[:1], nil)).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode == 0 && len(p.RecordBatches) > 0 && batchesIn(t, p.RecordBatches)[0] == 0
	})
}

// remote.log.manager.fetch.max.bytes.per.second: a fetch below the local log
// start reads while the broker's remote reads are within the rate; right after
// a read that took it past the rate, the next one reads nothing and, as Kafka's
// (an empty partition in its DelayedFetch), waits as a long poll: answered
// after MaxWaitMs, empty, without an error. Once within the rate it reads on.
func TestRemoteFetchQuotaLongPoll(t *testing.T) {
	g := s3test.Start(t)
	g.MakeBucket(t, "tiered")
	static := tieredStatic(g, "tiered")
	static["remote.log.manager.fetch.max.bytes.per.second"] = "16384"
	static["remote.fetch.max.wait.ms"] = "5000" // the reads within the rate are not cut short on a slow machine
	tb := startTestBroker(t, testBrokerOptions{Static: static})
	ctx := testCtx(t)
	cl := tb.client(t, kgo.DefaultProduceTopic("rq"), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(200),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(8<<10))
	seg, local, ret := "16384", "0", "-1"
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": ptr("true"), "segment.bytes": &seg,
		"local.retention.bytes": &local, "retention.ms": &ret}, "rq"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	value := make([]byte, 200)
	for i := range 600 {
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	el := tb.eng.Log(engine.TopicPartition{Topic: "rq", Partition: 0})
	eventually(t, 30*time.Second, "rq-0's copies and local deletions", func() bool { return el.LogStartOffset() >= 300 })

	fetch := func(offset int64) (*kmsg.FetchResponseTopicPartition, time.Duration) {
		start := time.Now()
		resp := tb.raw(t).roundTrip(fetchReq(12, 400, 1, 0, -1, []fetchPartReq{{topic: "rq", offset: offset, curEpoch: -1, lastEpoch: -1}}, nil)).(*kmsg.FetchResponse)
		return &resp.Topics[0].Partitions[0], time.Since(start)
	}
	p, took := fetch(0)
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("the first fetch: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	offs := batchesIn(t, p.RecordBatches)
	next := offs[len(offs)-1] + 1
	t.Logf("the first fetch: %d bytes in %v", len(p.RecordBatches), took)
	p, took = fetch(next)
	t.Logf("the next, over the rate: %d bytes in %v", len(p.RecordBatches), took)
	if p.ErrorCode != 0 || len(p.RecordBatches) != 0 || took < 350*time.Millisecond {
		t.Fatalf("a fetch over the rate: error %d, %d bytes, answered in %v (want empty after MaxWaitMs 400)", p.ErrorCode, len(p.RecordBatches), took)
	}
	eventually(t, 10*time.Second, "a fetch within the rate again", func() bool {
		p, _ := fetch(next)
		return p.ErrorCode == 0 && len(p.RecordBatches) > 0
	})
}

func TestClusterTieredLogStartOutlivesLeader(t *testing.T) {
	g := s3test.Start(t)
	g.MakeBucket(t, "tiered")
	c := startCluster(t, tieredStatic(g, "tiered"))
	ctx := testCtx(t)
	cl := clusterClient(t, c, kgo.DefaultProduceTopic("ls"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(200))
	adm := kadm.NewClient(cl)
	seg, local, ret := "16384", "0", "-1"
	if r, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"remote.storage.enable": ptr("true"), "segment.bytes": &seg,
		"local.retention.bytes": &local, "retention.ms": &ret}, "ls"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	const n = 1500
	value := make([]byte, 200)
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %d: %v", i, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	tp := engine.TopicPartition{Topic: "ls", Partition: 0}
	_, im := c.brokers[0].follower.Image()
	tt, _ := im.Topic("ls")
	leaderID := tt.Partitions[0].Leader
	// Every replica deletes locally what the leader copied.
	for _, b := range c.brokers {
		eventually(t, 30*time.Second, fmt.Sprintf("broker %d to delete copied segments", b.id), func() bool {
			return b.eng.Log(tp).LogStartOffset() > 0
		})
	}
	localMin := int64(n)
	for _, b := range c.brokers {
		localMin = min(localMin, b.eng.Log(tp).LogStartOffset())
	}
	at := localMin / 2
	if at == 0 {
		t.Fatalf("local log starts from %d: no room below", localMin)
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "ls", Partition: 0, At: at})
	dr, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("ls", 0); r.Err != nil || r.LowWatermark != at {
		t.Fatalf("DeleteRecords to %d: %+v", at, r)
	}
	var leader *clusterBroker
	var live []string
	for _, b := range c.brokers {
		if b.id == leaderID {
			leader = b
			continue
		}
		live = append(live, b.addr)
		eventually(t, 10*time.Second, fmt.Sprintf("follower %d to keep the log start %d", b.id, at), func() bool {
			return b.eng.Log(tp).RemoteLogStart() == at
		})
		if ls := b.eng.Log(tp).LogStartOffset(); ls <= at {
			t.Fatalf("follower %d's local log start %d, not above %d", b.id, ls, at)
		}
	}
	leader.stop()

	cons, err := kgo.NewClient(kgo.SeedBrokers(live...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"ls": {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(32<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	eventually(t, 30*time.Second, "a new leader answering ListOffsets -2", func() bool {
		starts, err := kadm.NewClient(cons).ListStartOffsets(ctx, "ls")
		if err != nil {
			return false
		}
		o, ok := starts.Lookup("ls", 0)
		if !ok || o.Err != nil {
			return false
		}
		if o.Offset != at {
			t.Fatalf("the new leader's log start %d, want %d (DeleteRecords)", o.Offset, at)
		}
		return true
	})
	next := int(at)
	for next < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed up to %d of %d: %v", next, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) != strconv.Itoa(next) || r.Offset != int64(next) {
				t.Fatalf("record %d: key %s at offset %d (log start %d)", next, r.Key, r.Offset, at)
			}
			next++
		})
	}
	// Remote retention deletes the copies wholly below it: one copy at most
	// starts at or below it (the one holding it).
	eventually(t, 30*time.Second, "the copies below the log start deleted", func() bool {
		below := 0
		for _, s := range copiedStarts(t, g, "tiered") {
			if s <= at {
				below++
			}
		}
		return below == 1
	})
}

// remote.storage.enable turned off (KIP-950): refused INVALID_CONFIG with
// Kafka's message unless remote.log.delete.on.disable=true; with it, the
// copies go from the bucket, the whole log starts at the local log start,
// and nothing more is copied. Tiered storage on a compacted topic is
// refused too, at creation and by an alter.
func TestTieredStorageDisabled(t *testing.T) {
	g := s3test.Start(t)
	g.MakeBucket(t, "tiered")
	tb := startTestBroker(t, testBrokerOptions{Sync: engine.SyncNone, Static: tieredStatic(g, "tiered")})
	ctx := testCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.DefaultProduceTopic("off"), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(200))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	seg, local, ret := "16384", "0", "-1"
	if r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": ptr("true"), "segment.bytes": &seg,
		"local.retention.bytes": &local, "retention.ms": &ret}, "off"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	value := make([]byte, 200)
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce %d: %v", i, err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 1000)
	el := tb.eng.Log(engine.TopicPartition{Topic: "off", Partition: 0})
	eventually(t, 30*time.Second, "copies and local deletions", func() bool { return el.LogStartOffset() >= 500 })

	alter := func(topic string, kv ...string) (code int16, msg string) {
		t.Helper()
		var acs []kadm.AlterConfig
		for i := 0; i < len(kv); i += 2 {
			acs = append(acs, kadm.AlterConfig{Name: kv[i], Value: ptr(kv[i+1])})
		}
		rs, err := adm.AlterTopicConfigs(ctx, acs, topic)
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].Err == nil {
			return 0, ""
		}
		var ke *kerr.Error
		if !errors.As(rs[0].Err, &ke) {
			t.Fatalf("alter %v: %v", kv, rs[0].Err)
		}
		return ke.Code, rs[0].ErrMessage
	}
	const offMsg = "It is invalid to disable remote storage without deleting remote data. " +
		"If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. " +
		"If you want to disable remote storage and delete all remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`."
	const compactMsg = "Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list."
	if code, msg := alter("off", "remote.storage.enable", "false"); code != kerr.InvalidConfig.Code || msg != offMsg {
		t.Fatalf("turning remote storage off alone: code %d, %q", code, msg)
	}
	if code, msg := alter("off", "cleanup.policy", "compact"); code != kerr.InvalidConfig.Code || msg != compactMsg {
		t.Fatalf("compacting a tiered topic: code %d, %q", code, msg)
	}
	r, _ := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": ptr("true"), "cleanup.policy": ptr("compact")}, "compacted")
	if !errors.Is(r.Err, kerr.InvalidConfig) || r.ErrMessage != compactMsg {
		t.Fatalf("creating a compacted tiered topic: %v %q", r.Err, r.ErrMessage)
	}
	if r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": ptr("compact")}, "compacted"); err != nil || r.Err != nil {
		t.Fatalf("create compacted: %v %v", err, r.Err)
	}
	if code, msg := alter("compacted", "remote.storage.enable", "true"); code != kerr.InvalidConfig.Code || msg != compactMsg {
		t.Fatalf("tiering a compacted topic: code %d, %q", code, msg)
	}
	if len(copiedStarts(t, g, "tiered")) == 0 {
		t.Fatal("no copy in the bucket")
	}

	if code, msg := alter("off", "remote.storage.enable", "false", "remote.log.delete.on.disable", "true"); code != 0 {
		t.Fatalf("turning remote storage off with remote.log.delete.on.disable: code %d, %q", code, msg)
	}
	eventually(t, 30*time.Second, "the copies deleted from the bucket", func() bool { return len(copiedStarts(t, g, "tiered")) == 0 })
	starts, err := adm.ListStartOffsets(ctx, "off")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("off", 0); o.Err != nil || o.Offset != el.LogStartOffset() || o.Offset == 0 {
		t.Fatalf("the log start after remote storage was disabled: %+v, local log start %d", o, el.LogStartOffset())
	}
	// Nothing more is copied, and the local log keeps what it holds.
	produce(1000, 1500)
	time.Sleep(500 * time.Millisecond)
	if n := len(copiedStarts(t, g, "tiered")); n != 0 {
		t.Fatalf("%d copies made after remote storage was disabled", n)
	}
	// A topic tiered by IncrementalAlterConfigs, on this broker with tiered storage.
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "later"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	if code, msg := alter("later", "remote.storage.enable", "true"); code != 0 {
		t.Fatalf("tiering a topic by an alter: code %d, %q", code, msg)
	}
}

// remote.storage.enable=true on a broker without remote.log.storage.system.enable:
// CreateTopics, IncrementalAlterConfigs and AlterConfigs are refused INVALID_CONFIG
// with Kafka's message (LogConfig.validateRemoteStorageOnlyIfSystemEnabled), and
// nothing changes; false is accepted.
func TestRemoteStorageRefusedWithoutSystem(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Sync: engine.SyncNone})
	ctx := testCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const msg = "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
	r, _ := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": ptr("true")}, "tiered")
	if !errors.Is(r.Err, kerr.InvalidConfig) || r.ErrMessage != msg {
		t.Fatalf("creating a tiered topic: %v %q", r.Err, r.ErrMessage)
	}
	if ts, err := adm.ListTopics(ctx, "tiered"); err != nil || ts.Has("tiered") {
		t.Fatalf("the refused topic exists: %v %v", err, ts)
	}
	if r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": ptr("false")}, "plain"); err != nil || r.Err != nil {
		t.Fatalf("create with remote.storage.enable=false: %v %v", err, r.Err)
	}
	set := []kadm.AlterConfig{{Name: "remote.storage.enable", Value: ptr("true")}}
	rs, err := adm.AlterTopicConfigs(ctx, set, "plain")
	if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig) || rs[0].ErrMessage != msg {
		t.Fatalf("IncrementalAlterConfigs remote.storage.enable=true: %v %+v", err, rs)
	}
	rs, err = adm.AlterTopicConfigsState(ctx, set, "plain")
	if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig) || rs[0].ErrMessage != msg {
		t.Fatalf("AlterConfigs remote.storage.enable=true: %v %+v", err, rs)
	}
	dc, err := adm.DescribeTopicConfigs(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := dc.On("plain", nil); err != nil {
		t.Fatal(err)
	} else {
		for _, kv := range c.Configs {
			if kv.Key == "remote.storage.enable" && kv.MaybeValue() != "false" {
				t.Fatalf("remote.storage.enable = %q after the refusals", kv.MaybeValue())
			}
		}
	}
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: ptr("60000")}}, "plain"); err != nil || rs[0].Err != nil {
		t.Fatalf("another key altered: %v %+v", err, rs)
	}
}

// A Fetch's MaxBytes bounds what remote partitions answer by their bytes, as it
// bounds local ones. The records are large enough that a remote read answers them
// as slices of the cached chunks over 16 KiB, which the Fetch frame splices in
// uncopied (net/wire): a fetch of two partitions read from remote storage with
// MaxBytes below what the first alone could answer fills the first and leaves the
// second empty.
func TestRemoteFetchMaxBytesAcrossPartitions(t *testing.T) {
	g := s3test.Start(t)
	g.MakeBucket(t, "tiered")
	tb := startTestBroker(t, testBrokerOptions{Static: tieredStatic(g, "tiered")})
	ctx := testCtx(t)
	cl := tb.client(t, kgo.DefaultProduceTopic("mb"), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	seg, local, ret := "262144", "0", "-1"
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, map[string]*string{"remote.storage.enable": ptr("true"), "segment.bytes": &seg,
		"local.retention.bytes": &local, "retention.ms": &ret}, "mb"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	value := make([]byte, 20<<10) // a batch of one record each: 20 KiB
	for i := range 60 {
		for part := range int32(2) {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: part, Key: []byte(strconv.Itoa(i)), Value: value}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	for part := range int32(2) {
		el := tb.eng.Log(engine.TopicPartition{Topic: "mb", Partition: part})
		eventually(t, 30*time.Second, fmt.Sprintf("mb-%d's copies and local deletions", part), func() bool { return el.LogStartOffset() >= 20 })
	}
	const maxBytes = 200 << 10
	req := fetchReq(12, 0, 1, 0, -1, []fetchPartReq{{topic: "mb", partition: 0, maxBytes: 1 << 20, curEpoch: -1, lastEpoch: -1},
		{topic: "mb", partition: 1, maxBytes: 1 << 20, curEpoch: -1, lastEpoch: -1}}, nil)
	req.MaxBytes = maxBytes
	resp := tb.raw(t).roundTrip(req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("fetch: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
	ps := resp.Topics[0].Partitions
	first, second := len(ps[0].RecordBatches), len(ps[1].RecordBatches)
	t.Logf("MaxBytes %d: partition 0 answered %d bytes (%d records), partition 1 %d bytes", maxBytes, first, len(batchesIn(t, ps[0].RecordBatches)), second)
	if ps[0].ErrorCode != 0 || ps[1].ErrorCode != 0 || first == 0 || first > maxBytes || second != 0 {
		t.Fatalf("MaxBytes %d: partition 0 answered error %d with %d bytes, partition 1 error %d with %d bytes; want partition 0 within MaxBytes and partition 1 empty",
			maxBytes, ps[0].ErrorCode, first, ps[1].ErrorCode, second)
	}
}
