package kafka

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactions with franz-go's kgo over real TCP against one node: commits and
// aborts seen by read_committed and read_uncommitted consumers, the last stable
// offset, fencing of a producer by a newer one with its transactional id, the
// transaction timeout, and consume-transform-produce with GroupTransactSession
// (TxnOffsetCommit).

// txnTestBroker is a single node with small internal topics and a quick scan for
// timed-out transactions.
func txnTestBroker(t *testing.T) *testBroker {
	t.Helper()
	return startTestBroker(t, testBrokerOptions{Static: map[string]string{
		"transaction.state.log.num.partitions":                        "3",
		"offsets.topic.num.partitions":                                "3",
		"group.initial.rebalance.delay.ms":                            "0",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
	}})
}

// txnProducer is a transactional producer writing to topic.
func txnProducer(t *testing.T, tb *testBroker, id, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return tb.client(t, append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}, opts...)...)
}

// transact produces values in one transaction and commits or aborts it.
func transact(t *testing.T, cl *kgo.Client, commit bool, values ...string) {
	t.Helper()
	ctx := testCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("producing %s: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("ending the transaction (commit %v): %v", commit, err)
	}
}

// consumeUntil reads topic from its start with isolation level iso until done holds
// for the values read so far (in order per partition), and returns them.
func consumeUntil(t *testing.T, tb *testBroker, topic string, iso kgo.IsolationLevel, done func([]string) bool) []string {
	t.Helper()
	cl := tb.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	var got []string
	for !done(got) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %s: have %v", topic, got)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consuming %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

func seq(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

func hasAll(want ...string) func([]string) bool {
	return func(got []string) bool {
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	}
}

func TestTxnCommitAbortIsolation(t *testing.T) {
	tb := txnTestBroker(t)
	adm := tb.admin(t)
	mustCreate(t, adm, "iso", 1, nil)
	p := txnProducer(t, tb, "iso-txn", "iso")
	transact(t, p, true, seq("c", 0, 5)...)
	transact(t, p, false, seq("a", 0, 5)...)
	transact(t, p, true, seq("c", 5, 10)...)

	committed := consumeUntil(t, tb, "iso", kgo.ReadCommitted(), hasAll("c-9"))
	if want := seq("c", 0, 10); !slices.Equal(committed, want) {
		t.Fatalf("read_committed: %v, want %v", committed, want)
	}
	all := consumeUntil(t, tb, "iso", kgo.ReadUncommitted(), func(got []string) bool { return len(got) >= 15 })
	if want := append(append(seq("c", 0, 5), seq("a", 0, 5)...), seq("c", 5, 10)...); !slices.Equal(all, want) {
		t.Fatalf("read_uncommitted: %v, want %v", all, want)
	}

	// An open transaction holds the last stable offset at its first record:
	// read_committed's end stops there, read_uncommitted's does not.
	ctx := testCtx(t)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("open")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ends := func() (stable, high int64) {
		t.Helper()
		c, err := adm.ListCommittedOffsets(ctx, "iso")
		if err != nil {
			t.Fatal(err)
		}
		e, err := adm.ListEndOffsets(ctx, "iso")
		if err != nil {
			t.Fatal(err)
		}
		co, _ := c.Lookup("iso", 0)
		eo, _ := e.Lookup("iso", 0)
		return co.Offset, eo.Offset
	}
	// 15 records and 3 markers before the open transaction's record at 18.
	if stable, high := ends(); stable != 18 || high != 19 {
		t.Fatalf("open transaction: last stable offset %d, high watermark %d; want 18, 19", stable, high)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// EndTxn is answered once PrepareCommit is durable; the marker follows.
	eventually(t, 10*time.Second, "the commit marker", func() bool {
		stable, high := ends()
		if high > 20 || stable > high {
			t.Fatalf("after the commit: last stable offset %d, high watermark %d; want 20, 20", stable, high)
		}
		return stable == 20 && high == 20
	})
	if got := consumeUntil(t, tb, "iso", kgo.ReadCommitted(), hasAll("open")); len(got) != 11 {
		t.Fatalf("read_committed after the last commit: %v", got)
	}
}

func TestTxnProducerFencing(t *testing.T) {
	tb := txnTestBroker(t)
	mustCreate(t, tb.admin(t), "fence", 1, nil)
	ctx := testCtx(t)
	old := txnProducer(t, tb, "fence-txn", "fence")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, kgo.StringRecord("zombie-1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The new producer's InitProducerId bumps the epoch and aborts the open
	// transaction of the old one.
	young := txnProducer(t, tb, "fence-txn", "fence")
	transact(t, young, true, "young-1")

	err := old.ProduceSync(ctx, kgo.StringRecord("zombie-2")).FirstErr()
	if err == nil {
		t.Fatal("the fenced producer's produce succeeded")
	}
	if cerr := old.EndTransaction(ctx, kgo.TryCommit); cerr == nil {
		t.Fatalf("the fenced producer's commit succeeded (its produce failed with %v)", err)
	}
	got := consumeUntil(t, tb, "fence", kgo.ReadCommitted(), hasAll("young-1"))
	if !slices.Equal(got, []string{"young-1"}) {
		t.Fatalf("read_committed: %v, want only the new producer's record", got)
	}
	// The zombie's first record is in the log, aborted.
	if got := consumeUntil(t, tb, "fence", kgo.ReadUncommitted(), hasAll("young-1")); !slices.Contains(got, "zombie-1") || slices.Contains(got, "zombie-2") {
		t.Fatalf("read_uncommitted: %v, want zombie-1 (aborted) and not zombie-2 (refused)", got)
	}
}

func TestTxnTimeoutAborts(t *testing.T) {
	tb := txnTestBroker(t)
	adm := tb.admin(t)
	mustCreate(t, adm, "timeout", 1, nil)
	ctx := testCtx(t)
	p := txnProducer(t, tb, "slow-txn", "timeout", kgo.TransactionTimeout(300*time.Millisecond))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("expired")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The coordinator's scan aborts the transaction once its timeout passed.
	eventually(t, 10*time.Second, "the timed-out transaction to be aborted", func() bool {
		d, err := adm.DescribeTransactions(ctx, "slow-txn")
		if err != nil {
			return false
		}
		s, ok := d["slow-txn"]
		return ok && s.Err == nil && s.State == "CompleteAbort"
	})
	if err := p.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("committing a transaction the coordinator aborted succeeded")
	}
	other := txnProducer(t, tb, "fast-txn", "timeout")
	transact(t, other, true, "in-time")
	if got := consumeUntil(t, tb, "timeout", kgo.ReadCommitted(), hasAll("in-time")); !slices.Equal(got, []string{"in-time"}) {
		t.Fatalf("read_committed: %v, want only the committed record", got)
	}
}

// TestTxnGroupTransactSession: a consume-transform-produce loop whose offsets are
// committed in its transactions; its first transaction is aborted and its input read
// again. Every input record appears in the output exactly once for read_committed,
// and the group's committed offsets are those of the committed transactions.
func TestTxnGroupTransactSession(t *testing.T) {
	tb := txnTestBroker(t)
	adm := tb.admin(t)
	mustCreate(t, adm, "ctp-in", 2, nil)
	mustCreate(t, adm, "ctp-out", 2, nil)
	ctx := testCtx(t)
	const n = 40
	produceInputs(t, tb.client(t, kgo.DefaultProduceTopic("ctp-in"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), n)
	transformLoop(t, []string{tb.addr}, "ctp-txn", "ctp", "ctp-in", "ctp-out", n, &keysSent{})
	checkOutputOnce(t, tb.client(t, kgo.ConsumeTopics("ctp-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond)), "ctp-out", n)
	committedSum := func(adm *kadm.Client) int64 {
		t.Helper()
		offs, err := adm.FetchOffsets(ctx, "ctp")
		if err != nil {
			t.Fatal(err)
		}
		sum := int64(0)
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil {
				t.Errorf("offset %s/%d: %v", o.Topic, o.Partition, o.Err)
			}
			sum += o.At
		})
		return sum
	}
	// Each input partition holds n/2 records, no markers. EndTxn is answered once the
	// commit is decided; the offsets apply when the marker reaches __consumer_offsets
	// (as in Kafka, an OffsetFetch without RequireStable sees the previous offsets
	// until then).
	eventually(t, 10*time.Second, "the transaction's offsets applied by its marker", func() bool {
		return committedSum(adm) == n
	})
	// read_uncommitted sees the aborted first transaction's output too.
	if all := consumeUntil(t, tb, "ctp-out", kgo.ReadUncommitted(), func(got []string) bool { return len(got) > n }); len(all) <= n {
		t.Fatal("no aborted output")
	}
	// After a restart the group's partition is replayed: the transactional offsets
	// are applied at their commit markers.
	tb.restart()
	eventually(t, 10*time.Second, "the group's offsets after a restart", func() bool {
		offs, err := tb.admin(t).FetchOffsets(ctx, "ctp")
		if err != nil || offs.Error() != nil {
			return false // the coordinator is loading
		}
		sum := int64(0)
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		if sum != n {
			t.Fatalf("after a restart the committed offsets sum to %d, want %d", sum, n)
		}
		return true
	})
}

// TestTxnGroupTransactSessionRebalance: two consume-transform-produce members of one
// group, the second joining while the first is copying (a rebalance moves partitions
// with their transactional offsets): every input record appears exactly once in the
// output read with read_committed.
func TestTxnGroupTransactSessionRebalance(t *testing.T) {
	tb := txnTestBroker(t)
	adm := tb.admin(t)
	mustCreate(t, adm, "reb-in", 4, nil)
	mustCreate(t, adm, "reb-out", 4, nil)
	ctx := testCtx(t)
	const n = 400
	in := tb.client(t, kgo.DefaultProduceTopic("reb-in"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var recs []*kgo.Record
	for _, v := range seq("in", 0, n) {
		recs = append(recs, kgo.StringRecord(v))
	}
	if err := in.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	loopCtx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	pollCtx, stop := context.WithCancel(loopCtx) // cancelled once everything is copied
	defer stop()
	var mu sync.Mutex
	copied, byMember := 0, map[string]int{}
	// The first member commits once, then waits (outside a transaction) until the
	// second, joining meanwhile, has taken partitions and committed, so that the
	// rebalance falls in the middle of the copy; then both go on.
	aCommitted, bCommitted := make(chan struct{}), make(chan struct{})
	// copyLoop runs one member until everything is copied; its session is closed when
	// it returns.
	copyLoop := func(id string, committed chan struct{}, waitFor chan struct{}) error {
		first := true
		defer func() {
			if first {
				close(committed) // never committed: do not keep the other waiting
			}
		}()
		sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(tb.addr), kgo.TransactionalID(id),
			kgo.ConsumerGroup("reb"), kgo.ConsumeTopics("reb-in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("reb-out"),
			kgo.RequireStableFetchOffsets(), kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchMaxPartitionBytes(2000))
		if err != nil {
			return err
		}
		defer sess.Close()
		for {
			mu.Lock()
			all := copied >= n
			mu.Unlock()
			if all {
				return nil
			}
			fs := sess.PollRecords(pollCtx, 25) // many transactions, not one
			if pollCtx.Err() != nil {
				mu.Lock()
				have := copied
				mu.Unlock()
				if have < n {
					return fmt.Errorf("%s: %d of %d copied when the time ran out", id, have, n)
				}
				return nil
			}
			recs := fs.Records()
			if len(recs) == 0 {
				continue
			}
			if err := sess.Begin(); err != nil {
				return err
			}
			for _, r := range recs {
				sess.Produce(loopCtx, kgo.StringRecord(strings.Replace(string(r.Value), "in", "out", 1)), nil)
			}
			ok, err := sess.End(loopCtx, kgo.TryCommit)
			if err != nil {
				return fmt.Errorf("%s: ending a transaction: %w", id, err)
			}
			if ok {
				mu.Lock()
				copied += len(recs)
				byMember[id] += len(recs)
				if copied >= n {
					stop()
				}
				mu.Unlock()
				if first {
					first = false
					close(committed)
					if waitFor != nil {
						select {
						case <-waitFor:
						case <-loopCtx.Done():
						}
					}
				}
			}
		}
	}
	member := func(id string, committed chan struct{}, waitFor chan struct{}, done chan<- error) {
		done <- copyLoop(id, committed, waitFor)
	}
	errs := make(chan error, 2)
	go member("reb-a", aCommitted, bCommitted, errs)
	select {
	case <-aCommitted:
	case err := <-errs:
		t.Fatal(err)
	}
	go member("reb-b", bCommitted, nil, errs)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if byMember["reb-a"] == 0 || byMember["reb-b"] == 0 {
		t.Fatalf("copied per member: %v; want both to have copied", byMember)
	}

	got := consumeUntil(t, tb, "reb-out", kgo.ReadCommitted(), func(got []string) bool { return len(got) >= n })
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for _, v := range seq("out", 0, n) {
		if seen[v] != 1 {
			t.Errorf("%s appears %d times in the output", v, seen[v])
		}
	}
	if len(got) != n {
		t.Fatalf("%d output records for %d input records", len(got), n)
	}
}
