package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An exactly-once pipeline on transaction version 2 through rebalances, as
// franz-go's own TestTxnEtl runs it: GroupTransactSession members copy a topic
// written by a transactional producer, members join and leave while the others
// commit (cooperative-sticky, and KIP-848 with the server-side assignor), on one
// node and on three with replication factor 3. No member's transaction may fail
// (before the fix an abort at the bumped epoch, sent while the last commit's
// markers were still being written, got PRODUCER_FENCED; and on three nodes the
// partition leaders' additions of one transaction, arriving together at the
// coordinator, got CONCURRENT_TRANSACTIONS, so that every transaction waited for a
// client metadata refresh), and every input record is in the output once.

// txnEtl is one level of the pipeline: the members of group copying in to out.
type txnEtl struct {
	t        *testing.T
	seeds    []string
	group    string
	in, out  string
	balancer kgo.GroupBalancer
	kip848   bool
	n        int

	wg        sync.WaitGroup
	committed atomic.Int64
	errs      chan error

	mu   sync.Mutex
	seen map[[2]int64]bool // partition, offset of input records in committed transactions
}

func (e *txnEtl) fail(err error) {
	select {
	case e.errs <- err:
	default:
	}
}

// member starts a member that commits quitAfter transactions and then aborts its
// next one and leaves (-1: stays until every input record is committed).
func (e *txnEtl) member(quitAfter int) {
	e.wg.Add(1)
	go e.run(quitAfter)
}

func (e *txnEtl) run(quitAfter int) {
	defer e.wg.Done()
	opts := []kgo.Opt{kgo.SeedBrokers(e.seeds...), kgo.TransactionalID(fmt.Sprintf("%s-%p", e.group, &quitAfter)),
		kgo.ConsumerGroup(e.group), kgo.ConsumeTopics(e.in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.Balancers(e.balancer), kgo.SessionTimeout(10 * time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond)}
	if e.kip848 {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		e.fail(err)
		return
	}
	defer sess.Close()
	txns := 0
	for e.committed.Load() < int64(e.n) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		fs := sess.PollRecords(ctx, 25) // many transactions, so that rebalances come between them
		cancel()
		if err := fs.Err(); errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
			continue
		}
		fs.EachError(func(topic string, p int32, err error) { e.fail(fmt.Errorf("fetching %s-%d: %w", topic, p, err)) })
		if err := sess.Begin(); err != nil {
			e.fail(fmt.Errorf("beginning a transaction: %w", err))
			return
		}
		recs := fs.Records()
		for _, r := range recs {
			sess.Produce(context.Background(), &kgo.Record{Topic: e.out, Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
				if err != nil && !errors.Is(err, kgo.ErrAborting) {
					e.fail(fmt.Errorf("transactional produce: %w", err))
				}
			})
		}
		want := quitAfter < 0 || txns < quitAfter
		ok, err := sess.End(context.Background(), kgo.TransactionEndTry(want))
		switch {
		case err != nil:
			e.fail(fmt.Errorf("member %s: ending a transaction: %w", e.group, err))
			return
		case !ok && !want:
			return
		case !ok:
			continue
		}
		txns++
		e.mu.Lock()
		for _, r := range recs {
			po := [2]int64{int64(r.Partition), r.Offset}
			if e.seen[po] {
				e.fail(fmt.Errorf("%s-%d offset %d consumed in two committed transactions", r.Topic, r.Partition, r.Offset))
			}
			e.seen[po] = true
		}
		e.mu.Unlock()
		e.committed.Add(int64(len(recs)))
	}
}

// runTxnEtl writes n keyed records to a new topic with a transactional producer
// (a commit every n/4), copies them with rebalancing members, and checks the copy.
func runTxnEtl(t *testing.T, seeds []string, adm *kadm.Client, rf int16, name string, balancer kgo.GroupBalancer, kip848 bool) {
	const n = 2000
	in, out := name+"-in", name+"-out"
	for _, topic := range []string{in, out} {
		if r, err := adm.CreateTopic(testCtx(t), 6, rf, nil, topic); err != nil {
			t.Fatalf("creating %s: %v (%s)", topic, err, r.ErrMessage)
		}
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(name+"-producer"), kgo.DefaultProduceTopic(in))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := 0; i < n; i++ {
		if i%(n/4) == 0 {
			if err := prod.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
		}
		prod.Produce(testCtx(t), kgo.KeySliceRecord([]byte(strconv.Itoa(i)), []byte("v")), func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("producing: %v", err)
			}
		})
		if (i+1)%(n/4) == 0 {
			if err := prod.Flush(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			if err := prod.EndTransaction(testCtx(t), kgo.TryCommit); err != nil {
				t.Fatalf("committing the input: %v", err)
			}
		}
	}

	e := &txnEtl{t: t, seeds: seeds, group: name, in: in, out: out, balancer: balancer, kip848: kip848, n: n,
		errs: make(chan error, 1), seen: map[[2]int64]bool{}}
	for range 3 {
		e.member(-1)
	}
	e.member(0) // leaves at once
	e.member(2) // after two transactions
	failed := func() {
		select {
		case err := <-e.errs:
			t.Fatal(err)
		default:
		}
	}
	// More members, and one that leaves, once a third of the input is copied.
	eventually(t, time.Minute, "a third of the input copied", func() bool { failed(); return e.committed.Load() >= n/3 })
	e.member(-1)
	e.member(-1)
	e.member(1)
	eventually(t, 2*time.Minute, "the whole input copied", func() bool { failed(); return e.committed.Load() >= n })
	e.wg.Wait()
	failed()

	// Every input record once in the output, read committed.
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Second)
	defer cancel()
	got := map[string]int{}
	for total := 0; total < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %d of %d records", out, total, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("reading %s: %v", out, err) })
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Key)]++; total++ })
	}
	for i := 0; i < n; i++ {
		if c := got[strconv.Itoa(i)]; c != 1 {
			t.Fatalf("key %d is in the output %d times", i, c)
		}
	}
}

func TestTxnV2EtlRebalances(t *testing.T) {
	cases := []struct {
		name     string
		balancer kgo.GroupBalancer
		kip848   bool
	}{
		{"cooperative-sticky", kgo.CooperativeStickyBalancer(), false},
		{"kip848", kgo.CooperativeStickyBalancer(), true},
	}
	t.Run("one-node", func(t *testing.T) {
		tb := startTestBroker(t, testBrokerOptions{Static: txnV2Static()})
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				runTxnEtl(t, []string{tb.addr}, tb.admin(t), 1, "etl1-"+tc.name, tc.balancer, tc.kip848)
			})
		}
	})
	t.Run("three-nodes", func(t *testing.T) {
		static := txnV2Static()
		static["transaction.state.log.replication.factor"] = "3"
		static["offsets.topic.replication.factor"] = "3"
		c := startCluster(t, static)
		adm := kadm.NewClient(clusterClient(t, c))
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				runTxnEtl(t, c.bootstrap(), adm, 3, "etl3-"+tc.name, tc.balancer, tc.kip848)
			})
		}
	})
}
