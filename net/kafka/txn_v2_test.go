package kafka

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/engine"
)

// Transaction version 2 (KIP-890 part 2) with franz-go's kgo over real TCP, with
// samsa.transaction.version=2: ApiVersions finalizes the feature, kgo then sends no
// AddPartitionsToTxn or AddOffsetsToTxn (the partition leaders and the group
// coordinator add the partitions on its behalf, Produce v12 and TxnOffsetCommit v5),
// EndTxn v5 bumps the epoch at every transaction, a producer of an earlier epoch is
// fenced, and consume-transform-produce stays exactly once on one node and on three.

// txnV2Static is txnTestBroker's configuration with transaction version 2.
func txnV2Static() map[string]string {
	return map[string]string{
		configs.TransactionVersionKey:                                 "2",
		"transaction.state.log.num.partitions":                        "3",
		"offsets.topic.num.partitions":                                "3",
		"group.initial.rebalance.delay.ms":                            "0",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
	}
}

// keysSent records the API keys a client writes (kgo's HookBrokerWrite).
type keysSent struct {
	mu   sync.Mutex
	keys map[int16]int
}

func (k *keysSent) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		k.keys = map[int16]int{}
	}
	k.keys[key]++
}

func (k *keysSent) count(key int16) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys[key]
}

// checkNoExplicitAdds fails unless the client sent EndTxn and no AddPartitionsToTxn
// or AddOffsetsToTxn: it ran under transaction version 2.
func (k *keysSent) checkNoExplicitAdds(t *testing.T) {
	t.Helper()
	if n, m, e := k.count(24), k.count(25), k.count(26); n != 0 || m != 0 || e == 0 {
		t.Fatalf("the client sent %d AddPartitionsToTxn, %d AddOffsetsToTxn, %d EndTxn; want 0, 0 and some (transaction version 2)", n, m, e)
	}
}

// txnEpoch is the producer id and epoch DescribeTransactions reports for id.
func txnEpoch(t *testing.T, adm *kadm.Client, id string) (int64, int16, string) {
	t.Helper()
	d, err := adm.DescribeTransactions(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := d[id]
	if !ok || s.Err != nil {
		t.Fatalf("describing %s: %v", id, s.Err)
	}
	return s.ProducerID, s.ProducerEpoch, s.State
}

func TestTxnV2ProducerEpochPerTransaction(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: txnV2Static()})
	adm := tb.admin(t)
	mustCreate(t, adm, "v2", 2, nil)

	// ApiVersions v3+: transaction.version supported 0-2, finalized at 2.
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "samsa-test", "1"
	resp := tb.raw(t).roundTrip(av).(*kmsg.ApiVersionsResponse)
	sup := slices.IndexFunc(resp.SupportedFeatures, func(f kmsg.ApiVersionsResponseSupportedFeature) bool { return f.Name == "transaction.version" })
	fin := slices.IndexFunc(resp.FinalizedFeatures, func(f kmsg.ApiVersionsResponseFinalizedFeature) bool { return f.Name == "transaction.version" })
	if sup < 0 || resp.SupportedFeatures[sup].MaxVersion != 2 || fin < 0 || resp.FinalizedFeatures[fin].MaxVersionLevel != 2 {
		t.Fatalf("ApiVersions features: supported %+v, finalized %+v; want transaction.version 0-2 finalized at 2", resp.SupportedFeatures, resp.FinalizedFeatures)
	}

	var sent keysSent
	p := txnProducer(t, tb, "v2-txn", "v2", kgo.WithHooks(&sent))
	transact(t, p, true, seq("c", 0, 4)...)
	pid, first, _ := txnEpoch(t, adm, "v2-txn")
	// Every EndTxn bumps the epoch: the next transaction runs at the answer's epoch.
	for i, commit := range []bool{false, true, false, true} {
		prefix := "c"
		if !commit {
			prefix = "a"
		}
		transact(t, p, commit, seq(prefix, 4*(i+1), 4*(i+2))...)
		gotPid, epoch, state := txnEpoch(t, adm, "v2-txn")
		if gotPid != pid || epoch != first+int16(i+1) {
			t.Fatalf("after transaction %d (%s): producer %d epoch %d, want %d epoch %d", i+2, state, gotPid, epoch, pid, first+int16(i+1))
		}
	}
	sent.checkNoExplicitAdds(t)

	// Both partitions get the last transaction's marker, at its bumped epoch
	// (DescribeProducers; EndTxn is answered before the markers are written).
	eventually(t, 10*time.Second, "the last markers at the bumped epoch", func() bool {
		ps, err := adm.DescribeProducers(testCtx(t), kadm.TopicsSet{"v2": {0: {}, 1: {}}})
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		ps.EachProducer(func(s kadm.DescribedProducer) {
			if s.ProducerID == pid && s.ProducerEpoch == first+4 && s.CurrentTxnStartOffset == -1 {
				done++
			}
		})
		return done == 2
	})

	want := append(append(seq("c", 0, 4), seq("c", 8, 12)...), seq("c", 16, 20)...)
	got := consumeUntil(t, tb, "v2", kgo.ReadCommitted(), hasAll(want...))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed: %v, want %v (no aborted record)", got, want)
	}
}

// TestTxnV2Fencing: a producer of an earlier epoch of the transactional id is fenced,
// whether a newer producer took the id (InitProducerId) or its own last EndTxn bumped
// the epoch past it; its batches are refused and nothing of it is read committed.
func TestTxnV2Fencing(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: txnV2Static()})
	adm := tb.admin(t)
	mustCreate(t, adm, "v2-fence", 1, nil)
	mustCreate(t, adm, "v2-other", 1, nil)
	ctx := testCtx(t)
	old := txnProducer(t, tb, "v2-fence-txn", "v2-fence")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, kgo.StringRecord("zombie-1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	young := txnProducer(t, tb, "v2-fence-txn", "v2-fence")
	transact(t, young, true, "young-1")
	if err := old.ProduceSync(ctx, kgo.StringRecord("zombie-2")).FirstErr(); err == nil {
		t.Fatal("the fenced producer's produce succeeded")
	}
	if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer's commit succeeded")
	}

	// A zombie with the epoch before young's last EndTxn (which bumped it): its batch
	// for a partition of the id's last transaction and for one the id never wrote to
	// (the addition on its behalf is refused by the coordinator) are both refused.
	var pid int64
	var epoch int16
	eventually(t, 10*time.Second, "young's commit to complete (its marker written)", func() bool {
		var state string
		pid, epoch, state = txnEpoch(t, adm, "v2-fence-txn")
		return state == "CompleteCommit"
	})
	rc := tb.raw(t)
	for _, topic := range []string{"v2-fence", "v2-other"} {
		batch, err := engine.AppendProducerRecords(nil, engine.BatchProducer{ID: pid, Epoch: epoch - 1, BaseSequence: 1, Transactional: true},
			[]engine.Record{{Timestamp: time.Now().UnixMilli(), Value: []byte("zombie-3")}})
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 12, -1, 5000
		req.TransactionID = kmsg.StringPtr("v2-fence-txn")
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		pr := rc.roundTrip(req).(*kmsg.ProduceResponse)
		if code := pr.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidProducerEpoch.Code {
			t.Fatalf("%s: a batch of epoch %d after the bump to %d: %v, want INVALID_PRODUCER_EPOCH", topic, epoch-1, epoch, kerr.ErrorForCode(code))
		}
	}
	// young goes on at its epoch.
	transact(t, young, true, "young-2")
	got := consumeUntil(t, tb, "v2-fence", kgo.ReadCommitted(), hasAll("young-2"))
	if !slices.Equal(got, []string{"young-1", "young-2"}) {
		t.Fatalf("read_committed: %v, want only the newest producer's records", got)
	}
}

// transformLoop runs a GroupTransactSession copying n records of topic in to out
// ("in-i" to "out-i"), its first transaction aborted after its output is flushed, and
// returns once n input records are in committed transactions. opts are added to the
// session's options.
func transformLoop(t *testing.T, seeds []string, id, group, in, out string, n int, sent *keysSent, opts ...kgo.Opt) {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.TransactionalID(id),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic(out),
		kgo.RequireStableFetchOffsets(), kgo.FetchMaxWait(200 * time.Millisecond), kgo.WithHooks(sent)}, opts...)
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Second)
	defer cancel()
	committed, aborted := 0, false
	for committed < n {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("transform loop: %d of %d committed", committed, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		commit := aborted
		aborted = true
		for _, r := range recs {
			sess.Produce(ctx, kgo.StringRecord(strings.Replace(string(r.Value), "in", "out", 1)), func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if !commit {
			if err := sess.Client().Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		ok, err := sess.End(ctx, kgo.TransactionEndTry(commit))
		if err != nil {
			t.Fatalf("ending the transaction: %v", err)
		}
		if ok {
			committed += len(recs)
		}
	}
}

// checkExactlyOnce checks the output of transformLoop (checkOutputOnce) and that
// the group's committed offsets come to cover the n inputs.
func checkExactlyOnce(t *testing.T, cl *kgo.Client, adm *kadm.Client, group, out string, n int) {
	t.Helper()
	checkOutputOnce(t, cl, out, n)
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	eventually(t, 10*time.Second, "the transactions' offsets applied by their markers", func() bool {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil || offs.Error() != nil {
			return false
		}
		sum := int64(0)
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return sum == int64(n)
	})
}

// checkOutputOnce reads out with read_committed through cl until n records and
// checks they are the n outputs of transformLoop ("out-0" ...) once each.
func checkOutputOnce(t *testing.T, cl *kgo.Client, out string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %s: have %d of %d", out, len(got), n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consuming %s: %v", out, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	want := seq("out", 0, n)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("output for read_committed: %v, want every input once", got)
	}
}

func produceInputs(t *testing.T, cl *kgo.Client, n int) {
	t.Helper()
	for _, v := range seq("in", 0, n) {
		if err := cl.ProduceSync(testCtx(t), kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTxnV2GroupTransactSession(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: txnV2Static()})
	adm := tb.admin(t)
	mustCreate(t, adm, "v2-in", 2, nil)
	mustCreate(t, adm, "v2-out", 2, nil)
	const n = 40
	produceInputs(t, tb.client(t, kgo.DefaultProduceTopic("v2-in"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), n)
	var sent keysSent
	transformLoop(t, []string{tb.addr}, "v2-ctp-txn", "v2-ctp", "v2-in", "v2-out", n, &sent)
	sent.checkNoExplicitAdds(t)
	if sent.count(28) == 0 {
		t.Fatal("no TxnOffsetCommit sent")
	}
	checkExactlyOnce(t, tb.client(t, kgo.ConsumeTopics("v2-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond)), adm, "v2-ctp", "v2-out", n)
}

// TestTxnV2Cluster: three nodes with transaction version 2; the transaction
// coordinator, the group coordinator and the partition leaders are spread over them,
// so the additions on the producer's behalf go over the brokers' channel
// (AddPartitionsToTxn v5 over Deps.Peer) as well as to the local coordinator.
func TestTxnV2Cluster(t *testing.T) {
	static := txnV2Static()
	static["transaction.state.log.replication.factor"] = "3"
	static["offsets.topic.replication.factor"] = "3"
	c := startCluster(t, static)
	adm := kadm.NewClient(clusterClient(t, c))
	for _, topic := range []string{"v2c-in", "v2c-out"} {
		if r, err := adm.CreateTopic(testCtx(t), 3, 3, nil, topic); err != nil {
			t.Fatalf("creating %s: %v (%s)", topic, err, r.ErrMessage)
		}
	}
	const n = 30
	produceInputs(t, clusterClient(t, c, kgo.DefaultProduceTopic("v2c-in"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), n)
	var sent keysSent
	transformLoop(t, c.bootstrap(), "v2c-ctp-txn", "v2c-ctp", "v2c-in", "v2c-out", n, &sent)
	sent.checkNoExplicitAdds(t)
	_, epoch, _ := txnEpoch(t, adm, "v2c-ctp-txn")
	if epoch < 2 {
		t.Fatalf("after at least two transactions the epoch is %d: not bumped per transaction", epoch)
	}
	checkExactlyOnce(t, clusterClient(t, c, kgo.ConsumeTopics("v2c-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond)), adm, "v2c-ctp", "v2c-out", n)
}

// TestTxnV0GroupTransactSession: at samsa.transaction.version=0 ApiVersions finalizes
// no transaction.version, and kgo keeps to KIP-890 part 1 (AddPartitionsToTxn and
// AddOffsetsToTxn before its produces and offsets, no epoch bump), exactly once.
func TestTxnV0GroupTransactSession(t *testing.T) {
	static := txnV2Static()
	static[configs.TransactionVersionKey] = "0"
	tb := startTestBroker(t, testBrokerOptions{Static: static})
	adm := tb.admin(t)
	mustCreate(t, adm, "v0-in", 2, nil)
	mustCreate(t, adm, "v0-out", 2, nil)
	const n = 20
	produceInputs(t, tb.client(t, kgo.DefaultProduceTopic("v0-in"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), n)
	var sent keysSent
	transformLoop(t, []string{tb.addr}, "v0-ctp-txn", "v0-ctp", "v0-in", "v0-out", n, &sent)
	if sent.count(24) == 0 || sent.count(25) == 0 {
		t.Fatalf("the client sent %d AddPartitionsToTxn and %d AddOffsetsToTxn; want some of each (transaction version 0)", sent.count(24), sent.count(25))
	}
	if _, epoch, _ := txnEpoch(t, adm, "v0-ctp-txn"); epoch != 0 {
		t.Fatalf("epoch %d after the transactions of one producer: bumped at version 0", epoch)
	}
	checkExactlyOnce(t, tb.client(t, kgo.ConsumeTopics("v0-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond)), adm, "v0-ctp", "v0-out", n)
}
