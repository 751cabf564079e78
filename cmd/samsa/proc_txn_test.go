package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProcTxnAcrossBrokers: on three combined nodes, a transaction whose partitions
// are led by brokers other than its coordinator commits (the coordinator's
// WriteTxnMarkers go to the other leaders over their inter-broker listeners), an
// aborted one leaves nothing for read_committed consumers, and every broker's
// partitions reach their last stable offset. Then a consume-transform-produce loop
// (GroupTransactSession) copies the topic exactly once, its offsets committed in its
// transactions (TxnOffsetCommit, verified with the transaction coordinator of
// another broker when it is not the group's). Last, the transaction coordinator is
// SIGKILLed with a transaction open: a new producer of the id, served by the new
// coordinator, fences and aborts it and commits its own. Then, with the node back, a
// second copy loop loses its transaction coordinator mid-transaction
// (copyUnderCoordinatorKill) and still copies every record exactly once.
func TestProcTxnAcrossBrokers(t *testing.T) {
	c := startProcCluster(t, specWith(combined(3), map[string]string{
		"transaction.state.log.num.partitions": "3",
		"offsets.topic.num.partitions":         "3",
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, parts = "xtxn", 6
	if err := createTopic(ctx, c.Node(1).Client, topic, parts, 3, nil); err != nil {
		t.Fatal(err)
	}
	var view map[int32]partitionView
	eventually(t, 10*time.Second, "every broker agrees on "+topic, func() error {
		var err error
		view, err = sameEverywhere(ctx, c.brokerAddrs(), topic, parts)
		return err
	})

	p := client(t, c.Bootstrap(), kgo.TransactionalID("xtxn-producer"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	transact := func(commit bool, prefix string, n int) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := p.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s-%d", prefix, i))).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction (commit %v): %v", commit, err)
		}
	}
	transact(true, "first", 4*parts)
	transact(false, "aborted", 2*parts)
	transact(true, "last", parts)

	adm := kadm.NewClient(client(t, c.Bootstrap()))
	d, err := adm.DescribeTransactions(ctx, "xtxn-producer")
	if err != nil {
		t.Fatal(err)
	}
	coord := d["xtxn-producer"].Coordinator
	remote := 0
	for _, pv := range view {
		if pv.Leader != coord {
			remote++
		}
	}
	if remote == 0 {
		t.Fatalf("every partition of %s is led by the coordinator %d: %+v", topic, coord, view)
	}
	t.Logf("coordinator %d; %d of %d partitions led by other brokers", coord, remote, parts)

	// read_committed, from the start, until the last transaction's records.
	cons := client(t, c.Bootstrap(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	var got []string
	readCtx, readCancel := context.WithTimeout(ctx, 20*time.Second)
	defer readCancel()
	for len(got) < 5*parts {
		fs := cons.PollFetches(readCtx)
		if readCtx.Err() != nil {
			t.Fatalf("read_committed: %d of %d records: %v", len(got), 5*parts, got)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	var want []string
	for i := range 4 * parts {
		want = append(want, fmt.Sprintf("first-%d", i))
	}
	for i := range parts {
		want = append(want, fmt.Sprintf("last-%d", i))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed: %v, want %v", got, want)
	}
	for _, v := range got {
		if strings.HasPrefix(v, "aborted") {
			t.Fatalf("read_committed saw aborted record %s", v)
		}
	}
	// Every partition's last stable offset reaches its end: every marker is there.
	eventually(t, 10*time.Second, "every partition stable", func() error {
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return err
		}
		end, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		for part := range int32(parts) {
			s, _ := stable.Lookup(topic, part)
			e, _ := end.Lookup(topic, part)
			// 7 records (4 + 2 + 1) and 3 markers per partition.
			if s.Err != nil || e.Err != nil || s.Offset != 10 || e.Offset != 10 {
				return fmt.Errorf("partition %d: stable %d (%v), end %d (%v), want 10", part, s.Offset, s.Err, e.Offset, e.Err)
			}
		}
		return nil
	})

	// Consume-transform-produce into another topic, the offsets in the transactions.
	if err := createTopic(ctx, c.Node(2).Client, topic+"-out", parts, 3, nil); err != nil {
		t.Fatal(err)
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...),
		kgo.TransactionalID("xtxn-copier"), kgo.ConsumerGroup("xtxn-group"), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic(topic+"-out"), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	copied := 0
	loopCtx, loopCancel := context.WithTimeout(ctx, 20*time.Second)
	defer loopCancel()
	for copied < 5*parts {
		fs := sess.PollFetches(loopCtx)
		if loopCtx.Err() != nil {
			t.Fatalf("copy loop: %d of %d copied", copied, 5*parts)
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			sess.Produce(loopCtx, kgo.StringRecord("copy-"+string(r.Value)), nil)
		}
		ok, err := sess.End(loopCtx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("copy transaction: %v", err)
		}
		if ok {
			copied += len(recs)
		}
	}
	offs, err := adm.FetchOffsets(ctx, "xtxn-group")
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		// Past each partition's last record (offset 8; its marker is 9).
		if o.Err != nil || o.At < 9 {
			t.Errorf("group offset %s/%d: %d (%v), want 9 or 10", o.Topic, o.Partition, o.At, o.Err)
		}
	})
	out := client(t, c.Bootstrap(), kgo.ConsumeTopics(topic+"-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	var copies []string
	for len(copies) < 5*parts {
		fs := out.PollFetches(readCtx)
		if readCtx.Err() != nil {
			t.Fatalf("reading the copies: %d of %d", len(copies), 5*parts)
		}
		fs.EachRecord(func(r *kgo.Record) { copies = append(copies, strings.TrimPrefix(string(r.Value), "copy-")) })
	}
	slices.Sort(copies)
	if !slices.Equal(copies, want) {
		t.Fatalf("copies for read_committed: %v, want each committed record once: %v", copies, want)
	}

	// SIGKILL of the transaction coordinator while a transaction is open: the new
	// leader of the id's __transaction_state partition loads its state, a new producer
	// of the id fences the open transaction (aborted) and commits its own.
	opener := client(t, c.Bootstrap(), kgo.TransactionalID("xtxn-failover"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err := opener.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range parts {
		if err := opener.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("open-%d", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	d, err = adm.DescribeTransactions(ctx, "xtxn-failover")
	if err != nil {
		t.Fatal(err)
	}
	victim := d["xtxn-failover"].Coordinator
	c.Kill(victim)
	survivors := strings.Join(c.brokerAddrs(victim), ",")
	young := client(t, survivors, kgo.TransactionalID("xtxn-failover"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err := young.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range parts {
		if err := young.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("after-%d", i))).FirstErr(); err != nil {
			t.Fatalf("produce after the coordinator's SIGKILL: %v", err)
		}
	}
	if err := young.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the coordinator's SIGKILL: %v", err)
	}
	after := client(t, survivors, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	failCtx, failCancel := context.WithTimeout(ctx, 20*time.Second)
	defer failCancel()
	var final []string
	for len(final) < 6*parts {
		fs := after.PollFetches(failCtx)
		if failCtx.Err() != nil {
			t.Fatalf("read_committed after the failover: %d of %d: %v", len(final), 6*parts, final)
		}
		fs.EachRecord(func(r *kgo.Record) { final = append(final, string(r.Value)) })
	}
	for _, v := range final {
		if strings.HasPrefix(v, "open-") || strings.HasPrefix(v, "aborted-") {
			t.Fatalf("read_committed after the failover saw %s", v)
		}
	}
	t.Logf("coordinator %d killed; %d committed records read after the failover", victim, len(final))
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	copyUnderCoordinatorKill(t, c)
}

// copyUnderCoordinatorKill: a consume-transform-produce loop (GroupTransactSession)
// copies 300 records while the broker holding its transaction coordinator is
// SIGKILLed after the first 100: every input record is in the output exactly once
// for read_committed consumers (the transactions the kill broke are aborted, their
// input read again from the committed offsets).
func copyUnderCoordinatorKill(t *testing.T, c *procCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	const in, out, n = "eos-in", "eos-out", 300
	prod := copyInput(ctx, t, c, in, out, 3, 3, n)
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...),
		kgo.TransactionalID("eos-copier"), kgo.ConsumerGroup("eos-group"), kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic(out), kgo.FetchMaxWait(200*time.Millisecond), kgo.FetchMaxPartitionBytes(2048),
		kgo.SessionTimeout(6*time.Second), kgo.TransactionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	adm := kadm.NewClient(prod)
	copied, aborted, killed := 0, 0, int32(-1)
	for copied < n {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("copy loop: %d of %d copied, %d transactions aborted", copied, n, aborted)
		}
		got := fs.Records()
		if len(got) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			sess.Produce(ctx, kgo.StringRecord("copy-"+string(r.Value)), nil)
		}
		if killed < 0 && copied >= n/3 {
			// The copies of this transaction are sent (maybe not all acknowledged),
			// its end is not: the coordinator dies with it open.
			d, err := adm.DescribeTransactions(ctx, "eos-copier")
			if err != nil {
				t.Fatal(err)
			}
			killed = d["eos-copier"].Coordinator
			c.Kill(killed)
			t.Logf("transaction coordinator %d killed with a transaction open, after %d copies", killed, copied)
		}
		ok, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("copy transaction after %d copies: %v", copied, err)
		}
		if ok {
			copied += len(got)
		} else {
			aborted++
		}
	}
	survivors := strings.Join(c.brokerAddrs(killed), ",")
	reader := client(t, survivors, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int{}
	total := 0
	for total < n {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading the copies: %d of %d", total, n)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	}
	for i := range n {
		if k := fmt.Sprintf("copy-eos-%03d", i); seen[k] != 1 {
			t.Errorf("%s copied %d times for read_committed", k, seen[k])
		}
	}
	if total != n {
		t.Errorf("%d copies read, want %d", total, n)
	}
	t.Logf("%d records copied exactly once across the SIGKILL of coordinator %d (%d transactions aborted)", n, killed, aborted)
}

// copyInput is the prologue of the copy loops: it creates the topics in and out
// (parts partitions of replication factor rf each) through node 1 and produces n
// records "eos-000" ... to in, round robin, through the client it returns.
func copyInput(ctx context.Context, t *testing.T, c *procCluster, in, out string, parts int32, rf int16, n int) *kgo.Client {
	t.Helper()
	for _, topic := range []string{in, out} {
		if err := createTopic(ctx, c.Node(1).Client, topic, parts, rf, nil); err != nil {
			t.Fatal(err)
		}
	}
	prod := client(t, c.Bootstrap(), kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, kgo.StringRecord(fmt.Sprintf("eos-%03d", i)))
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return prod
}
