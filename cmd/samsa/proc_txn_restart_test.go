package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProcTxnCopySingleNodeRestart: on one node, a consume-transform-produce loop
// (GroupTransactSession, its input offsets committed in its transactions) copies 300
// records while the only `samsa serve` process is SIGKILLed twice and restarted on
// the same data directory: once with a transaction open (its copies sent, maybe not
// all acknowledged, its end not sent), once right after a commit was answered, and
// once with the copier gone too, its transaction open and its copies acknowledged (a
// new copier of the same transactional id fences and aborts it). Every
// input record is in the output exactly once for read_committed consumers, nothing
// of an aborted transaction among them, and the group's committed offsets are at the
// end of the input. The transaction coordinator, the group coordinator and the
// partitions all come back from the node's own disk: no other replica holds them.
func TestProcTxnCopySingleNodeRestart(t *testing.T) {
	c := startProcCluster(t, specWith(combined(1), map[string]string{
		"transaction.state.log.num.partitions": "3",
		"offsets.topic.num.partitions":         "3",
		"group.initial.rebalance.delay.ms":     "0",
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const in, out, parts, n = "eos1-in", "eos1-out", 3, 300
	copyInput(ctx, t, c, in, out, parts, 1, n)
	newSession := func() *kgo.GroupTransactSession {
		t.Helper()
		sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.Bootstrap()),
			kgo.TransactionalID("eos1-copier"), kgo.ConsumerGroup("eos1-group"), kgo.ConsumeTopics(in),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DefaultProduceTopic(out), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.SessionTimeout(6*time.Second), kgo.TransactionTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	sess := newSession()
	defer func() { sess.Close() }()
	restart := func(why string, copied int) {
		t.Helper()
		c.Kill(1)
		if err := c.Start(1); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitReady(ctx, 1, nil); err != nil {
			t.Fatal(err)
		}
		t.Logf("node SIGKILLed and restarted %s, after %d copies", why, copied)
	}
	copied, aborted, txns, abandoned := 0, 0, 0, 0
	openKill, commitKill, bothKill := false, false, false
	for copied < n {
		// At most 20 records a transaction: the loop runs 15 or more of them.
		fs := sess.PollRecords(ctx, 20)
		if ctx.Err() != nil {
			t.Fatalf("copy loop: %d of %d copied, %d of %d transactions aborted", copied, n, aborted, txns)
		}
		got := fs.Records()
		if len(got) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		txns++
		for _, r := range got {
			sess.Produce(ctx, kgo.StringRecord("copy-"+string(r.Value)), nil)
		}
		if !openKill && copied >= n/4 {
			openKill = true
			restart("with a transaction open", copied)
		} else if !bothKill && copied >= 3*n/4 {
			// The copier dies too: its copies are acknowledged (so on disk) and
			// the transaction is open when the node is killed. The next producer
			// of the id fences it, and its input is read again from the group's
			// committed offsets.
			bothKill = true
			if err := sess.Client().Flush(ctx); err != nil {
				t.Fatal(err)
			}
			sess.Close()
			abandoned += len(got)
			aborted++
			restart("with the copier gone and its transaction open", copied)
			sess = newSession()
			continue
		}
		ok, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("copy transaction after %d copies: %v", copied, err)
		}
		if !ok {
			aborted++
			continue
		}
		copied += len(got)
		if !commitKill && copied >= n/2 {
			commitKill = true
			restart("right after a commit was answered", copied)
		}
	}
	sess.Close()

	// A record after everything in each output partition, outside any transaction:
	// read_committed returns it only once every transaction before it is decided, so
	// the reader below has read every committed copy when it has read all three.
	ends := make([]*kgo.Record, parts)
	for p := range ends {
		ends[p] = &kgo.Record{Topic: out, Partition: int32(p), Value: []byte("end")}
	}
	marker := client(t, c.Bootstrap(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := marker.ProduceSync(ctx, ends...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	reader := client(t, c.Bootstrap(), kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int{}
	total, endsSeen := 0, 0
	for endsSeen < parts {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading the copies read_committed: %d copies and %d of %d end records", total, endsSeen, parts)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "end" {
				endsSeen++
				return
			}
			seen[string(r.Value)]++
			total++
		})
	}
	for i := range n {
		if k := fmt.Sprintf("copy-eos-%03d", i); seen[k] != 1 {
			t.Errorf("%s copied %d times for read_committed", k, seen[k])
		}
	}
	if total != n {
		t.Errorf("%d copies read read_committed, want %d", total, n)
	}
	// read_uncommitted also returns the copies of the transactions the kills aborted.
	dirty := 0
	for _, recs := range readAll(t, c.Bootstrap(), out) {
		for _, v := range recs {
			if strings.HasPrefix(v, "copy-") {
				dirty++
			}
		}
	}
	if dirty < n+abandoned {
		t.Errorf("read_uncommitted: %d copies, want at least the %d committed and the %d of the abandoned transaction", dirty, n, abandoned)
	}

	adm := kadm.NewClient(client(t, c.Bootstrap()))
	inEnds, err := adm.ListEndOffsets(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := adm.FetchOffsets(ctx, "eos1-group")
	if err != nil {
		t.Fatal(err)
	}
	inEnds.Each(func(e kadm.ListedOffset) {
		if o, ok := offs.Lookup(in, e.Partition); !ok || o.Err != nil || o.At != e.Offset {
			t.Errorf("group offset of %s/%d: %+v, want the partition's end %d", in, e.Partition, o, e.Offset)
		}
	})
	t.Logf("%d records copied exactly once across three restarts of the only node; %d of %d transactions aborted, %d copies in the log for read_uncommitted",
		n, aborted, txns, dirty)
}
