package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/coordinator/remotelog"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/engine/remote"
	"github.com/samsa-broker/samsa/internal/s3test"
	"github.com/samsa-broker/samsa/replication"
	"github.com/samsa-broker/samsa/replication/tiered"
)

const metaPartitions = 3

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// node is one broker: its engine, replica manager, remote log metadata
// manager and remote log manager, leading data-0 (tiered) and every
// __remote_log_metadata partition.
type node struct {
	eng  *engine.Manager
	repl *replication.Manager
	meta *remotelog.Manager
	rlm  *tiered.Manager
	data *replication.Partition
}

func dataConfig() engine.LogConfig {
	cfg := engine.DefaultLogConfig()
	cfg.SegmentBytes = 16 << 10
	cfg.IndexIntervalBytes = 1024
	cfg.RemoteStorage = true
	cfg.LocalRetentionBytes = 0 // every copied segment goes locally
	cfg.RetentionBytes = -1
	cfg.RetentionMs = -1
	cfg.FileDeleteDelayMs = 0
	return cfg
}

func openNode(t testing.TB, dir string, epoch int32, sm *remote.StorageManager, cfg engine.LogConfig, opts ...func(*tiered.Config)) *node {
	t.Helper()
	return openNodeWith(t, dir, epoch, sm, cfg, true, opts...)
}

// openNodeWith is openNode; without data, the node holds only the metadata
// partitions (data's topic deleted).
func openNodeWith(t testing.TB, dir string, epoch int32, sm *remote.StorageManager, cfg engine.LogConfig, data bool, opts ...func(*tiered.Config)) *node {
	t.Helper()
	eng, err := engine.Open(engine.Options{Dirs: []string{dir}, Sync: engine.SyncNone, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	repl, err := replication.NewManager(replication.Config{NodeID: 1, Logs: replication.EngineLogs(eng), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var d replication.Delta
	for p := range int32(metaPartitions) {
		d.Leaders = append(d.Leaders, replication.PartitionState{Topic: remotelog.Topic, TopicID: [16]byte{9}, Partition: p,
			Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch, MinISR: 1, LogConfig: remotelog.LogConfig()})
	}
	if data {
		d.Leaders = append(d.Leaders, replication.PartitionState{Topic: "data", TopicID: [16]byte{7, 7}, Partition: 0,
			Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch, MinISR: 1, LogConfig: cfg})
	}
	if err := repl.Apply(d); err != nil {
		t.Fatal(err)
	}
	n := &node{eng: eng, repl: repl}
	n.meta = remotelog.New(remotelog.Config{Replicas: repl, Partitions: func() int32 { return metaPartitions }})
	tc := tiered.Config{NodeID: 1, Replicas: repl, Storage: sm, Metadata: n.meta, Logger: quiet, TempDir: t.TempDir()}
	for _, o := range opts {
		o(&tc)
	}
	n.rlm = tiered.New(tc)
	repl.SetRemoteLog(n.rlm)
	n.data = repl.Partition(engine.TopicPartition{Topic: "data", Partition: 0})
	return n
}

func (n *node) close() {
	n.rlm.Close()
	n.repl.Close()
	n.eng.Close()
}

// produce appends count records of about 200 bytes, keyed by their number,
// in batches of 10, through replication (acks=-1 on a single replica).
func (n *node) produce(t *testing.T, from, count int) {
	t.Helper()
	n.produceAt(t, from, count, func(int) int64 { return time.Now().UnixMilli() })
}

// produceAt is produce with record j's timestamp ts(j).
func (n *node) produceAt(t *testing.T, from, count int, ts func(int) int64) {
	t.Helper()
	for i := from; i < from+count; i += 10 {
		var recs []engine.Record
		for j := i; j < min(i+10, from+count); j++ {
			recs = append(recs, engine.Record{Timestamp: ts(j), Key: []byte(fmt.Sprint(j)), Value: bytes.Repeat([]byte{byte(j)}, 200)})
		}
		b, err := engine.AppendRecords(nil, recs)
		if err != nil {
			t.Fatal(err)
		}
		pr := new(replication.Produce)
		done := make(chan struct{})
		pr.Begin(n.repl, -1, 5*time.Second, func() { close(done) })
		if _, err := pr.Append(n.data, b); err != nil {
			t.Fatal(err)
		}
		pr.Seal()
		<-done
		if err := pr.Part(0).Err; err != nil {
			t.Fatal(err)
		}
	}
}

// readAll reads data-0 from offset 0 to its high watermark: below the local
// log start from remote storage through the partition handle, then the
// local log; it returns the keys in order.
func readAll(t *testing.T, p *replication.Partition) []string {
	t.Helper()
	el := p.EngineLog()
	var keys []string
	off := int64(0)
	for off < el.HighWatermark() {
		var b []byte
		if off < el.LogStartOffset() {
			var err error
			if b, err = p.ReadRemote(context.Background(), off, 8<<10); err != nil {
				t.Fatalf("remote read at %d: %v", off, err)
			}
		} else {
			var err error
			if b, err = el.ReadCopy(off, 8<<10, el.HighWatermark(), true, nil); err != nil {
				t.Fatalf("local read at %d: %v", off, err)
			}
		}
		if len(b) == 0 {
			t.Fatalf("nothing read at %d", off)
		}
		err := engine.ForEachRecordInBatches(b, func(r engine.Record) error {
			if r.Offset >= off {
				keys = append(keys, string(r.Key))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		off = engine.BatchesEnd(b)
	}
	return keys
}

func storage(t testing.TB, g *s3test.Gateway) *remote.StorageManager {
	t.Helper()
	g.MakeBucket(t, "tiered")
	sm, err := remote.New(remote.Config{Bucket: "tiered", Region: "us-east-1", Endpoint: g.Endpoint, PathStyle: true,
		AccessKeyID: g.Access, SecretAccessKey: g.Secret, CallTimeout: 20 * time.Second, AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return sm
}

func wantKeys(t *testing.T, keys []string, n int) {
	t.Helper()
	if len(keys) != n {
		t.Fatalf("read %d records, want %d", len(keys), n)
	}
	for i, k := range keys {
		if k != fmt.Sprint(i) {
			t.Fatalf("record %d has key %s", i, k)
		}
	}
}

// The leader copies every sealed segment below the high watermark, local
// retention then deletes exactly the copied ones, and every record reads
// back once, in order, from remote and local storage together. The next
// leader (the node restarted at a new leader epoch) lists the same copies
// and copies only what is new.
func TestCopyRetainReadBack(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	dir := t.TempDir()
	n := openNode(t, dir, 0, sm, dataConfig())
	n.produce(t, 0, 600)
	el := n.data.EngineLog()
	sealed := el.SealedSegments(el.HighWatermark())
	if len(sealed) < 4 {
		t.Fatalf("%d sealed segments, want at least 4", len(sealed))
	}
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	segs, err := n.meta.ListRemoteLogSegments(remote.TopicIDPartition{TopicID: remote.Uuid{7, 7}, Topic: "data", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != len(sealed) {
		t.Fatalf("%d copies listed, want %d", len(segs), len(sealed))
	}
	for i, s := range segs {
		if s.State != remote.CopySegmentFinished || s.StartOffset != sealed[i].Base || s.EndOffset != sealed[i].Next-1 || s.SegmentSize != sealed[i].Size {
			t.Fatalf("copy %d: %+v, segment %+v", i, s, sealed[i])
		}
	}
	if el.LogStartOffset() != sealed[len(sealed)-1].Next {
		t.Fatalf("local log start %d, want %d: the copied segments stay", el.LogStartOffset(), sealed[len(sealed)-1].Next)
	}
	if n.data.LogStartOffset() != 0 || n.data.LocalLogStartOffset() != el.LogStartOffset() {
		t.Fatalf("log start %d, local %d", n.data.LogStartOffset(), n.data.LocalLogStartOffset())
	}
	if off, ok := n.data.EarliestPendingUpload(); !ok || off != sealed[len(sealed)-1].Next {
		t.Fatalf("earliest pending upload %d %v", off, ok)
	}
	wantKeys(t, readAll(t, n.data), 600)
	if _, err := n.data.ReadRemote(context.Background(), el.HighWatermark()+5, 1024); !errors.Is(err, replication.ErrOffsetOutOfRange) {
		t.Fatalf("a remote read past every copy: %v", err)
	}
	var sealedBytes int64
	for _, s := range sealed {
		sealedBytes += s.Size
	}
	ts, ps := n.rlm.Stats()
	if len(ts) != 1 || ts[0].Topic != "data" || ts[0].CopyBytes != sealedBytes || ts[0].FetchBytes == 0 || ts[0].CopyErrors != 0 || ts[0].FetchErrors != 0 {
		t.Fatalf("topic stats %+v, want %d bytes copied", ts, sealedBytes)
	}
	if len(ps) != 1 || ps[0].RemoteLogSizeBytes != sealedBytes || ps[0].CopyLagBytes != 0 {
		t.Fatalf("partition stats %+v", ps)
	}
	n.close()

	n2 := openNode(t, dir, 1, sm, dataConfig())
	defer n2.close()
	n2.produce(t, 600, 300)
	if err := n2.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	segs2, err := n2.meta.ListRemoteLogSegments(remote.TopicIDPartition{TopicID: remote.Uuid{7, 7}, Topic: "data", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(segs2) <= len(segs) {
		t.Fatalf("the next leader lists %d copies, had %d", len(segs2), len(segs))
	}
	for i := range segs2 {
		if i < len(segs) && segs2[i].ID != segs[i].ID {
			t.Fatalf("copy %d changed: %v, was %v", i, segs2[i].ID, segs[i].ID)
		}
		if i > 0 && segs2[i].StartOffset != segs2[i-1].EndOffset+1 {
			t.Fatalf("copies %d and %d: [%d,%d] then [%d,%d]", i-1, i, segs2[i-1].StartOffset, segs2[i-1].EndOffset, segs2[i].StartOffset, segs2[i].EndOffset)
		}
	}
	wantKeys(t, readAll(t, n2.data), 900)
}

// A copy left COPY_SEGMENT_STARTED by a leader that stopped mid-copy is
// deleted (objects and metadata) by the next leader's task, which copies the
// segment again under a new id: it is listed once.
func TestInterruptedCopyCleanedUp(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	dir := t.TempDir()
	n := openNode(t, dir, 0, sm, dataConfig())
	n.produce(t, 0, 300)
	el := n.data.EngineLog()
	s := el.SealedSegments(el.HighWatermark())[0]
	// What the leader had done when it stopped: the copy recorded as
	// started, its objects stored, no COPY_SEGMENT_FINISHED.
	tp := remote.TopicIDPartition{TopicID: remote.Uuid{7, 7}, Topic: "data", Partition: 0}
	md := &remote.SegmentMetadata{ID: remote.NewSegmentID(tp), StartOffset: s.Base, EndOffset: s.Next - 1, MaxTimestamp: s.MaxTimestamp,
		BrokerID: 1, EventTimestamp: time.Now().UnixMilli(), SegmentSize: s.Size, LeaderEpochs: []remote.EpochEntry{{Epoch: 0, StartOffset: s.Base}},
		State: remote.CopySegmentStarted}
	if err := n.meta.AddRemoteLogSegmentMetadata(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	if err := sm.CopyLogSegmentData(context.Background(), md, &remote.LogSegmentData{LogSegment: s.Log, OffsetIndex: s.OffsetIndex,
		TimeIndex: s.TimeIndex, ProducerSnapshot: s.ProducerSnapshot, LeaderEpochIndex: []byte("0\n0\n")}); err != nil {
		t.Fatal(err)
	}
	n.close()

	n2 := openNode(t, dir, 1, sm, dataConfig())
	defer n2.close()
	if err := n2.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	segs, err := n2.meta.ListRemoteLogSegments(tp)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range segs {
		if c.ID == md.ID {
			t.Fatalf("the interrupted copy is still listed: %+v", c)
		}
		if c.State != remote.CopySegmentFinished {
			t.Fatalf("a copy left %s", c.State)
		}
	}
	if len(segs) == 0 || segs[0].StartOffset != s.Base {
		t.Fatalf("segment %d not copied again: %+v", s.Base, segs)
	}
	if rc, err := sm.FetchIndex(context.Background(), md, remote.IndexOffset); err == nil {
		rc.Close()
		t.Fatal("the interrupted copy's objects are still stored")
	} else if !errors.Is(err, remote.ErrRemoteResourceNotFound) {
		t.Fatal(err)
	}
	wantKeys(t, readAll(t, n2.data), 300)
}

// retention.bytes governs the whole log: the oldest copies are deleted from
// remote storage once local and remote bytes together exceed it, and the
// log start moves to the oldest copy left.
func TestRemoteRetentionBySize(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	cfg := dataConfig()
	cfg.RetentionBytes = 48 << 10
	n := openNode(t, t.TempDir(), 0, sm, cfg)
	defer n.close()
	n.produce(t, 0, 900)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	tp := remote.TopicIDPartition{TopicID: remote.Uuid{7, 7}, Topic: "data", Partition: 0}
	segs, err := n.meta.ListRemoteLogSegments(tp)
	if err != nil {
		t.Fatal(err)
	}
	var remoteBytes int64
	for _, s := range segs {
		remoteBytes += s.SegmentSize
	}
	el := n.data.EngineLog()
	total := remoteBytes + el.Size()
	if len(segs) == 0 || segs[0].StartOffset == 0 {
		t.Fatalf("no copy deleted: %d copies from %d", len(segs), segs[0].StartOffset)
	}
	// The oldest copies went while what stayed was at least retention.bytes.
	if total < cfg.RetentionBytes || total-segs[0].SegmentSize >= cfg.RetentionBytes {
		t.Fatalf("%d bytes kept (remote %d, local %d; oldest copy %d), retention.bytes %d", total, remoteBytes, el.Size(), segs[0].SegmentSize, cfg.RetentionBytes)
	}
	if n.data.LogStartOffset() != segs[0].StartOffset {
		t.Fatalf("log start %d, oldest copy %d", n.data.LogStartOffset(), segs[0].StartOffset)
	}
	if _, err := n.data.ReadRemote(context.Background(), 0, 1024); !errors.Is(err, replication.ErrOffsetOutOfRange) {
		t.Fatalf("a read of a deleted copy: %v", err)
	}
}

// remote.log.manager.copy.max.bytes.per.second paces the copies, and a
// follower copies nothing.
func TestCopyRateAndLeaderOnly(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	n := openNode(t, t.TempDir(), 0, sm, dataConfig())
	defer n.close()
	n.produce(t, 0, 400)
	el := n.data.EngineLog()
	sealed := el.SealedSegments(el.HighWatermark())
	var rest int64
	for _, s := range sealed[1:] {
		rest += s.Size
	}
	const rate = 64 << 10
	rlm := tiered.New(tiered.Config{NodeID: 1, Replicas: n.repl, Storage: sm, Metadata: n.meta, Logger: quiet, CopyBytesPerSecond: rate, TempDir: t.TempDir()})
	start := time.Now()
	if err := rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	took, least := time.Since(start), time.Duration(float64(rest)/rate*float64(time.Second))
	if took < least {
		t.Fatalf("%d segments copied in %v at %d B/s, want at least %v", len(sealed), took, rate, least)
	}
	t.Logf("%d segments (%d bytes after the first) copied in %v at %d B/s", len(sealed), rest, took, rate)

	// More sealed segments, then the same node as a follower of data-0
	// (leader 2, epoch 1): they are not copied.
	n.produce(t, 400, 200)
	if s := el.SealedSegments(el.HighWatermark()); len(s) == 0 || s[len(s)-1].Next <= el.RemoteEnd() {
		t.Fatalf("no segment left to copy: %d sealed, remote end %d", len(s), el.RemoteEnd())
	}
	if err := n.repl.Apply(replication.Delta{Followers: []replication.PartitionState{{Topic: "data", TopicID: [16]byte{7, 7}, Partition: 0,
		Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1, MinISR: 1, LogConfig: dataConfig()}}}); err != nil {
		t.Fatal(err)
	}
	tp := remote.TopicIDPartition{TopicID: remote.Uuid{7, 7}, Topic: "data", Partition: 0}
	before, _ := n.meta.ListRemoteLogSegments(tp)
	if err := rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after, _ := n.meta.ListRemoteLogSegments(tp); len(after) != len(before) {
		t.Fatalf("a follower's task changed the copies: %d, were %d", len(after), len(before))
	}
}

// A follower learns from the metadata how far the leader's copies reach
// and deletes its copied local segments by local retention, as the leader
// does.
func TestFollowerRetainsUpToLeadersCopies(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	n := openNode(t, t.TempDir(), 0, sm, dataConfig())
	defer n.close()
	if err := n.repl.Apply(replication.Delta{Followers: []replication.PartitionState{{Topic: "data", TopicID: [16]byte{7, 7}, Partition: 1,
		Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2, LeaderEpoch: 0, PartitionEpoch: 0, MinISR: 1, LogConfig: dataConfig()}}}); err != nil {
		t.Fatal(err)
	}
	f := n.repl.Partition(engine.TopicPartition{Topic: "data", Partition: 1})
	el := f.EngineLog()
	// What the follower fetched from its leader.
	for i := 0; i < 300; i += 10 {
		var recs []engine.Record
		for j := i; j < i+10; j++ {
			recs = append(recs, engine.Record{Timestamp: time.Now().UnixMilli(), Key: []byte(fmt.Sprint(j)), Value: bytes.Repeat([]byte{1}, 200)})
		}
		b, err := engine.AppendRecords(nil, recs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := el.Append(b, engine.AppendOptions{LeaderEpoch: 0}); err != nil {
			t.Fatal(err)
		}
	}
	el.SetHighWatermark(el.LogEndOffset())
	sealed := el.SealedSegments(el.HighWatermark())
	if len(sealed) < 3 {
		t.Fatalf("%d sealed segments", len(sealed))
	}
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el.LogStartOffset() != 0 {
		t.Fatalf("the follower deleted local segments before any copy: log start %d", el.LogStartOffset())
	}
	// The leader (node 2) records its copies of the first two segments.
	tp := remote.TopicIDPartition{TopicID: remote.Uuid{7, 7}, Topic: "data", Partition: 1}
	for _, s := range sealed[:2] {
		md := &remote.SegmentMetadata{ID: remote.NewSegmentID(tp), StartOffset: s.Base, EndOffset: s.Next - 1, MaxTimestamp: s.MaxTimestamp,
			BrokerID: 2, EventTimestamp: time.Now().UnixMilli(), SegmentSize: s.Size, LeaderEpochs: []remote.EpochEntry{{Epoch: 0, StartOffset: s.Base}},
			State: remote.CopySegmentStarted}
		if err := n.meta.AddRemoteLogSegmentMetadata(context.Background(), md); err != nil {
			t.Fatal(err)
		}
		if err := n.meta.UpdateRemoteLogSegmentMetadata(context.Background(), &remote.SegmentMetadataUpdate{ID: md.ID, BrokerID: 2, State: remote.CopySegmentFinished}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el.LogStartOffset() != sealed[2].Base {
		t.Fatalf("follower's local log start %d, want %d (the leader's copies end there)", el.LogStartOffset(), sealed[2].Base)
	}
	if segs, _ := n.meta.ListRemoteLogSegments(tp); len(segs) != 2 {
		t.Fatalf("the follower's task changed the copies: %d", len(segs))
	}
}

// A transaction aborted in a copied segment is listed for reads of that
// range from remote storage (the copy's transaction index), as a
// READ_COMMITTED fetch needs.
func TestRemoteAbortedTransactions(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	n := openNode(t, t.TempDir(), 0, sm, dataConfig())
	defer n.close()
	n.produce(t, 0, 50)
	el := n.data.EngineLog()
	txn, err := engine.AppendProducerRecords(nil, engine.BatchProducer{ID: 42, Epoch: 0, BaseSequence: 0, Transactional: true},
		[]engine.Record{{Timestamp: time.Now().UnixMilli(), Key: []byte("aborted"), Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if g, needed := el.StartTxnVerification(42, 0, 0); needed && !el.CompleteTxnVerification(42, g) {
		t.Fatal("transaction verification failed")
	}
	res, err := el.Append(txn, engine.AppendOptions{LeaderEpoch: 0})
	if err != nil {
		t.Fatal(err)
	}
	mres, err := el.AppendMarker(engine.Marker{ProducerID: 42, ProducerEpoch: 0, Timestamp: time.Now().UnixMilli()}, engine.AppendOptions{LeaderEpoch: 0})
	if err != nil {
		t.Fatal(err)
	}
	n.produce(t, 52, 400)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el.LogStartOffset() <= mres.BaseOffset {
		t.Fatalf("the transaction's segment is still local (local start %d, marker at %d)", el.LogStartOffset(), mres.BaseOffset)
	}
	b, err := n.data.ReadRemote(context.Background(), 0, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	ab, err := n.data.RemoteAbortedTransactions(context.Background(), 0, engine.BatchesEnd(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(ab) != 1 || ab[0].ProducerID != 42 || ab[0].FirstOffset != res.BaseOffset || ab[0].LastOffset != mres.BaseOffset {
		t.Fatalf("aborted transactions %+v, want producer 42 from %d to %d", ab, res.BaseOffset, mres.BaseOffset)
	}
	if ab, err := n.data.RemoteAbortedTransactions(context.Background(), mres.BaseOffset+1, el.LogStartOffset()); err != nil || len(ab) != 0 {
		t.Fatalf("past the transaction: %+v %v", ab, err)
	}
}

// ListOffsets by timestamp searches the copies in remote storage, then the
// local log: the first record at or after the timestamp, wherever it lives.
func TestOffsetForTimestampAcrossTiers(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	n := openNode(t, t.TempDir(), 0, sm, dataConfig())
	defer n.close()
	base := time.Now().Add(-time.Hour).UnixMilli()
	const count = 600
	n.produceAt(t, 0, count, func(j int) int64 { return base + int64(j)*10 })
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	local := n.data.LocalLogStartOffset()
	if local < 200 {
		t.Fatalf("local log start %d: too little in remote storage", local)
	}
	for _, k := range []int64{0, 1, 57, 233, local - 1, local, local + 3, count - 1} {
		for _, delta := range []int64{0, -5} {
			if k == 0 && delta < 0 {
				continue
			}
			off, ts, ok, err := n.data.OffsetForTimestamp(context.Background(), base+k*10+delta)
			if err != nil || !ok || off != k || ts != base+k*10 {
				t.Fatalf("offset for timestamp of record %d%+d ms: %d at %d, %v %v", k, delta, off, ts, ok, err)
			}
		}
	}
	if _, _, ok, err := n.data.OffsetForTimestamp(context.Background(), base+count*10); ok || err != nil {
		t.Fatalf("a timestamp past the last record: %v %v", ok, err)
	}
}

// ListOffsets MAX_TIMESTAMP (-3) over the whole log: the largest timestamp
// lies only in a copy in remote storage (its record deleted locally), and a
// local record with the same timestamp later loses the tie to it; once
// DeleteRecords passes it, the largest one left, locally.
func TestMaxTimestampAcrossTiers(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	n := openNode(t, t.TempDir(), 0, sm, dataConfig())
	defer n.close()
	base := time.Now().Add(-time.Hour).UnixMilli()
	const count, top = 600, 57
	peak := base + 1_000_000
	ts := func(j int) int64 {
		if j == top {
			return peak
		}
		return base + int64(j)*10
	}
	n.produceAt(t, 0, count, ts)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	el := n.data.EngineLog()
	if local := n.data.LocalLogStartOffset(); local <= top+100 {
		t.Fatalf("local log start %d: record %d still local", local, top)
	}
	if lts, loff := el.MaxTimestamp(); lts != ts(count-1) || loff != count-1 {
		t.Fatalf("the local log's largest timestamp %d at %d", lts, loff)
	}
	if mts, off, err := n.data.MaxTimestamp(context.Background()); err != nil || mts != peak || off != top {
		t.Fatalf("largest timestamp %d at %d (%v), want %d at %d", mts, off, err, peak, top)
	}
	n.produceAt(t, count, 10, func(int) int64 { return peak })
	if mts, off, err := n.data.MaxTimestamp(context.Background()); err != nil || mts != peak || off != top {
		t.Fatalf("with a local tie: largest timestamp %d at %d (%v), want %d at %d", mts, off, err, peak, top)
	}
	if _, err := n.data.DeleteRecordsBefore(top + 1); err != nil {
		t.Fatal(err)
	}
	if mts, off, err := n.data.MaxTimestamp(context.Background()); err != nil || mts != peak || off != count {
		t.Fatalf("after DeleteRecords past it: largest timestamp %d at %d (%v), want %d at %d", mts, off, err, peak, count)
	}
}

// The object store hanging (its process stopped): the task's copies fail
// within the storage manager's timeouts and no local segment is deleted;
// reads from remote storage fail with the retriable ErrRemoteStorage while
// local reads go on. Once it answers again, the next task cleans up what
// the failed copy left and copies everything; reads from remote work again.
func TestObjectStoreHangs(t *testing.T) {
	g := s3test.Start(t)
	g.MakeBucket(t, "tiered")
	sm, err := remote.New(remote.Config{Bucket: "tiered", Region: "us-east-1", Endpoint: g.Endpoint, PathStyle: true,
		AccessKeyID: g.Access, SecretAccessKey: g.Secret, CallTimeout: 2 * time.Second, AttemptTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n := openNode(t, t.TempDir(), 0, sm, dataConfig())
	defer n.close()
	n.produce(t, 0, 300)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	el := n.data.EngineLog()
	copied := el.RemoteEnd()
	n.produce(t, 300, 300)
	// The task must have a segment to copy once the store hangs, or it asks the
	// store nothing and succeeds: a sealed segment wholly below the HW and past
	// the last copy. Records are added until there is one.
	produced := 600
	for copyable(el, copied) == 0 {
		if produced >= 1200 {
			t.Fatalf("no sealed segment past the remote end %d below the HW %d: %+v", copied, el.HighWatermark(), el.SealedSegments(el.HighWatermark()))
		}
		n.produce(t, produced, 100)
		produced += 100
	}

	g.Pause(t)
	start := time.Now()
	if err := n.rlm.RunOnce(context.Background()); err == nil {
		t.Fatalf("a task against a hung store succeeded (remote end %d, was %d; %d segments to copy before the task)",
			el.RemoteEnd(), copied, copyable(el, copied))
	} else if !errors.Is(err, remote.ErrRemoteStorage) {
		t.Fatalf("the task failed with %v, want a remote storage error", err)
	}
	t.Logf("the task gave up after %v", time.Since(start))
	if el.RemoteEnd() != copied || el.LogStartOffset() > copied {
		t.Fatalf("remote end %d, local log start %d: moved past %d while the store hung", el.RemoteEnd(), el.LogStartOffset(), copied)
	}
	if _, err := n.data.ReadRemote(context.Background(), 0, 1024); !errors.Is(err, replication.ErrRemoteStorage) {
		t.Fatalf("a remote read from a hung store: %v", err)
	}
	if b, err := el.ReadCopy(el.LogStartOffset(), 1024, el.HighWatermark(), true, nil); err != nil || len(b) == 0 {
		t.Fatalf("a local read while the store hangs: %d bytes, %v", len(b), err)
	}
	n.produce(t, produced, 100)
	produced += 100
	if ts, ps := n.rlm.Stats(); len(ts) != 1 || ts[0].CopyErrors == 0 || ts[0].FetchErrors == 0 || len(ps) != 1 || ps[0].CopyLagBytes == 0 {
		t.Fatalf("stats while the store hangs: %+v %+v", ts, ps)
	}

	g.Resume(t)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	segs, err := n.meta.ListRemoteLogSegments(remote.TopicIDPartition{TopicID: remote.Uuid{7, 7}, Topic: "data", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		if s.State != remote.CopySegmentFinished {
			t.Fatalf("a copy left %s after the store came back", s.State)
		}
	}
	if el.RemoteEnd() <= copied {
		t.Fatalf("nothing copied after the store came back (remote end %d)", el.RemoteEnd())
	}
	wantKeys(t, readAll(t, n.data), produced)
}

// copyable counts the sealed segments of el wholly below its high watermark
// and past remoteEnd: what the leader's next task copies.
func copyable(el *engine.Log, remoteEnd int64) int {
	n := 0
	for _, s := range el.SealedSegments(el.HighWatermark()) {
		if s.Next > remoteEnd {
			n++
		}
	}
	return n
}

// DeleteRecords on a tiered partition raises the whole log's start below
// the local one: reads below it are out of range, the next task deletes
// the copies wholly below it, and it survives in the log's directory.
func TestDeleteRecordsBelowLocalStart(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	n := openNode(t, t.TempDir(), 0, sm, dataConfig())
	defer n.close()
	n.produce(t, 0, 600)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	tp := remote.TopicIDPartition{TopicID: remote.Uuid{7, 7}, Topic: "data", Partition: 0}
	before, _ := n.meta.ListRemoteLogSegments(tp)
	if len(before) < 3 {
		t.Fatalf("%d copies", len(before))
	}
	local := n.data.LocalLogStartOffset()
	cut := before[1].StartOffset + 5 // inside the second copy
	low, err := n.data.DeleteRecordsBefore(cut)
	if err != nil || low != cut || n.data.LogStartOffset() != cut {
		t.Fatalf("DeleteRecords(%d): low watermark %d (%v), log start %d", cut, low, err, n.data.LogStartOffset())
	}
	if n.data.LocalLogStartOffset() != local {
		t.Fatalf("local log start moved to %d", n.data.LocalLogStartOffset())
	}
	if _, err := n.data.ReadRemote(context.Background(), cut-1, 1024); !errors.Is(err, replication.ErrOffsetOutOfRange) {
		t.Fatalf("a read below the log start: %v", err)
	}
	if b, err := n.data.ReadRemote(context.Background(), cut, 1024); err != nil || engine.BatchesEnd(b) <= cut {
		t.Fatalf("a read at the log start: %d bytes, %v", len(b), err)
	}
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	after, _ := n.meta.ListRemoteLogSegments(tp)
	if len(after) != len(before)-1 || after[0].ID != before[1].ID {
		t.Fatalf("copies after DeleteRecords: %d from %d, want the second on", len(after), after[0].StartOffset)
	}
	if n.data.LogStartOffset() != cut {
		t.Fatalf("log start %d after the task, want %d", n.data.LogStartOffset(), cut)
	}
	// Past the local log start: the local one moves too.
	if low, err := n.data.DeleteRecordsBefore(local + 1); err != nil || low != local+1 || n.data.LocalLogStartOffset() > local+1 {
		t.Fatalf("DeleteRecords past the local start: %d, %v, local %d", low, err, n.data.LocalLogStartOffset())
	}
}

// A store that refuses the writes (wrong credentials): every task fails
// with ErrAccessDenied, counted as a copy error, and nothing is deleted
// locally.
func TestStoreDeniesWrites(t *testing.T) {
	g := s3test.Start(t)
	g.MakeBucket(t, "tiered")
	sm, err := remote.New(remote.Config{Bucket: "tiered", Region: "us-east-1", Endpoint: g.Endpoint, PathStyle: true,
		AccessKeyID: g.Access, SecretAccessKey: "not-" + g.Secret, CallTimeout: 5 * time.Second, AttemptTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n := openNode(t, t.TempDir(), 0, sm, dataConfig())
	defer n.close()
	n.produce(t, 0, 300)
	for range 2 {
		if err := n.rlm.RunOnce(context.Background()); !errors.Is(err, remote.ErrAccessDenied) {
			t.Fatalf("a task against a store denying writes: %v", err)
		}
	}
	el := n.data.EngineLog()
	if el.LogStartOffset() != 0 || el.RemoteEnd() != 0 {
		t.Fatalf("local log start %d, remote end %d: something counted as copied", el.LogStartOffset(), el.RemoteEnd())
	}
	if ts, _ := n.rlm.Stats(); len(ts) != 1 || ts[0].CopyErrors != 1 || ts[0].DeleteErrors != 2 {
		t.Fatalf("stats %+v, want one copy error and two failed clean-ups (the second task stops at its clean-up)", ts)
	}
	wantKeys(t, readAll(t, n.data), 300)
}

// remote.log.copy.disable: the task copies nothing more; what was copied
// stays readable.
func TestCopyDisabled(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	cfg := dataConfig()
	n := openNode(t, t.TempDir(), 0, sm, cfg)
	defer n.close()
	n.produce(t, 0, 300)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	el := n.data.EngineLog()
	end := el.RemoteEnd()
	cfg.RemoteCopyDisable = true
	cfg.LocalRetentionBytes = -2 // with the copies stopped, retention.bytes (-1: keep) governs the local log
	el.SetConfig(cfg)
	n.produce(t, 300, 300)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el.RemoteEnd() != end {
		t.Fatalf("remote end moved from %d to %d with remote.log.copy.disable", end, el.RemoteEnd())
	}
	wantKeys(t, readAll(t, n.data), 600)
}

// A tiered partition deleted with its topic: the next task deletes its
// copies from the store and the metadata.
func TestDeletedPartitionCopiesDeleted(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	n := openNode(t, t.TempDir(), 0, sm, dataConfig())
	defer n.close()
	n.produce(t, 0, 300)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	tp := remote.TopicIDPartition{TopicID: remote.Uuid{7, 7}, Topic: "data", Partition: 0}
	segs, _ := n.meta.ListRemoteLogSegments(tp)
	if len(segs) == 0 {
		t.Fatal("nothing copied")
	}
	if err := n.repl.Apply(replication.Delta{Stopped: []replication.Stop{{TP: engine.TopicPartition{Topic: "data", Partition: 0}, Delete: true}}}); err != nil {
		t.Fatal(err)
	}
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after, err := n.meta.ListRemoteLogSegments(tp); err != nil || len(after) != 0 {
		t.Fatalf("copies listed after the deletion: %d (%v)", len(after), err)
	}
	for _, s := range segs {
		if rc, err := sm.FetchIndex(context.Background(), &s, remote.IndexOffset); err == nil {
			rc.Close()
			t.Fatalf("copy %s still stored", s.ID)
		} else if !errors.Is(err, remote.ErrRemoteResourceNotFound) {
			t.Fatal(err)
		}
	}
}

// The deletion of a deleted partition's copies outlives the node that began
// it: the store hangs while the task deletes them, the node stops with the
// deletion marked and started in __remote_log_metadata, and once restarted
// (no longer holding the partition) its task finishes it: no object left in
// the bucket, no copy listed, the deletion finished.
func TestDeletedPartitionDeletionResumed(t *testing.T) {
	g := s3test.Start(t)
	g.MakeBucket(t, "tiered")
	sm, err := remote.New(remote.Config{Bucket: "tiered", Region: "us-east-1", Endpoint: g.Endpoint, PathStyle: true,
		AccessKeyID: g.Access, SecretAccessKey: g.Secret, CallTimeout: 2 * time.Second, AttemptTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	n := openNode(t, dir, 0, sm, dataConfig())
	n.produce(t, 0, 300)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	tp := remote.TopicIDPartition{TopicID: remote.Uuid{7, 7}, Topic: "data", Partition: 0}
	segs, _ := n.meta.ListRemoteLogSegments(tp)
	if len(segs) < 2 {
		t.Fatalf("%d copies", len(segs))
	}
	g.Pause(t)
	if err := n.repl.Apply(replication.Delta{Stopped: []replication.Stop{{TP: engine.TopicPartition{Topic: "data", Partition: 0}, Delete: true}}}); err != nil {
		t.Fatal(err)
	}
	if err := n.rlm.RunOnce(context.Background()); err == nil {
		t.Fatal("the copies deleted from a hung store")
	}
	pending, err := n.meta.PartitionDeletions()
	if err != nil || len(pending) != 1 || pending[0] != tp {
		t.Fatalf("unfinished deletions before the stop: %v (%v)", pending, err)
	}
	n.close()
	g.Resume(t)
	if objects(t, g) == 0 {
		t.Fatal("no object in the bucket before the restart")
	}

	n = openNodeWith(t, dir, 1, sm, dataConfig(), false)
	defer n.close()
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after, err := n.meta.ListRemoteLogSegments(tp); err != nil || len(after) != 0 {
		t.Fatalf("copies listed after the restart: %d (%v)", len(after), err)
	}
	if pending, err := n.meta.PartitionDeletions(); err != nil || len(pending) != 0 {
		t.Fatalf("unfinished deletions after the restart: %v (%v)", pending, err)
	}
	if k := objects(t, g); k != 0 {
		t.Fatalf("%d objects left in the bucket", k)
	}
}

// objects counts the files under the bucket's directory of g.
func objects(t *testing.T, g *s3test.Gateway) int {
	t.Helper()
	k := 0
	err := filepath.WalkDir(filepath.Join(g.Root, "tiered"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			k++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A replica emptied to start at the local log start takes the producer
// state and leader epoch from the copy ending there.
func TestRebuildAuxState(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	n := openNode(t, t.TempDir(), 0, sm, dataConfig())
	defer n.close()
	for i := 0; i < 5; i++ { // an idempotent producer, early only
		b, err := engine.AppendProducerRecords(nil, engine.BatchProducer{ID: 9, Epoch: 1, BaseSequence: int32(i)},
			[]engine.Record{{Timestamp: time.Now().UnixMilli(), Key: []byte(fmt.Sprint(i)), Value: []byte("x")}})
		if err != nil {
			t.Fatal(err)
		}
		pr := new(replication.Produce)
		done := make(chan struct{})
		pr.Begin(n.repl, -1, 5*time.Second, func() { close(done) })
		if _, err := pr.Append(n.data, b); err != nil {
			t.Fatal(err)
		}
		pr.Seal()
		<-done
		if err := pr.Part(0).Err; err != nil {
			t.Fatal(err)
		}
	}
	n.produce(t, 5, 400)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	el := n.data.EngineLog()
	start := el.LogStartOffset()
	if err := el.TruncateFullyAndStartAt(start); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := el.ProducerState(9); ok {
		t.Fatal("an emptied log knows producer 9")
	}
	if err := n.rlm.RebuildAuxState(context.Background(), n.data, start); err != nil {
		t.Fatal(err)
	}
	if epoch, seq, ok := el.ProducerState(9); !ok || epoch != 1 || seq != 4 {
		t.Fatalf("producer 9 after the rebuild: epoch %d, last sequence %d (%v); want 1, 4", epoch, seq, ok)
	}
	if e := el.LatestEpoch(); e != 0 {
		t.Fatalf("latest epoch %d after the rebuild, want 0", e)
	}
}
