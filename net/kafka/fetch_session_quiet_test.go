package kafka

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/fetchsession"
)

// TestQuietFollowerPartitionsWake: over three brokers, the idle partitions of the
// followers' fetch sessions go quiet on their leaders (requests leave them out), and
// an append wakes them: with the periodic rescan put off for the whole test, acks=all
// produces to every partition complete (each needs both followers to fetch the
// records of a quiet partition), every replica reaches the leader's log end, the
// partitions go quiet again, and the ISR stays whole although the followers stay idle
// for longer than replica.lag.time.max.ms between rounds.
func TestQuietFollowerPartitionsWake(t *testing.T) {
	old := quietRescan
	quietRescan = time.Hour
	defer func() { quietRescan = old }()
	const parts, lag = 8, time.Second
	c := startCluster(t, map[string]string{"replica.fetch.wait.max.ms": "100",
		"replica.lag.time.max.ms": strconv.Itoa(int(lag / time.Millisecond))})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.MetadataMinAge(10*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 3, nil, "quiet"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	quiet := func() int {
		n := 0
		for _, b := range c.brokers {
			if dp := b.b.dataPath.Load(); dp != nil {
				followers, _ := dp.sessions.QuietParts()
				n += followers
			}
		}
		return n
	}
	allQuiet := func(what string) {
		eventually(t, 20*time.Second, what, func() bool { return quiet() == 2*parts })
		for _, b := range c.brokers {
			if dp := b.b.dataPath.Load(); dp != nil {
				checkAwakeLists(t, dp.sessions)
			}
		}
	}
	isrWhole := func() error {
		m := metadataOf(t, c.brokers[0].addr, "quiet")
		for _, p := range m.Topics[0].Partitions {
			if len(p.ISR) != 3 {
				return fmt.Errorf("partition %d: ISR %v", p.Partition, p.ISR)
			}
		}
		return nil
	}
	eventually(t, 20*time.Second, "the topic's ISRs to be whole", func() bool {
		m := metadataOf(t, c.brokers[0].addr, "quiet")
		return m.Topics[0].ErrorCode == 0 && isrWhole() == nil
	})
	allQuiet("every follower partition to go quiet")
	for round := 1; round <= 2; round++ {
		// Idle for twice the lag: the quiet followers stay in the ISR.
		t0 := time.Now()
		eventually(t, 30*time.Second, "twice the lag to pass", func() bool {
			if err := isrWhole(); err != nil {
				t.Fatalf("round %d, idle: %v", round, err)
			}
			return time.Since(t0) > 2*lag
		})
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		for p := range int32(parts) {
			r := &kgo.Record{Topic: "quiet", Partition: p, Value: []byte("v")}
			if err := cl.ProduceSync(pctx, r).FirstErr(); err != nil {
				cancel()
				t.Fatalf("round %d, partition %d: acks=all produce: %v", round, p, err)
			}
		}
		cancel()
		eventually(t, 20*time.Second, "every replica at the log end", func() bool {
			for _, b := range c.brokers {
				for p := range int32(parts) {
					l := b.eng.Log(engine.TopicPartition{Topic: "quiet", Partition: p})
					if l == nil || l.LogEndOffset() != int64(round) || l.HighWatermark() != int64(round) {
						return false
					}
				}
			}
			return true
		})
		if err := isrWhole(); err != nil {
			t.Fatalf("round %d, after the produce: %v", round, err)
		}
		allQuiet(fmt.Sprintf("round %d: every follower partition quiet again", round))
	}
	// A session that goes takes its quiet partitions off the list: the brokers stop.
	for _, b := range c.brokers {
		b.b.repl.Close()
	}
	for _, b := range c.brokers {
		if dp := b.b.dataPath.Load(); dp != nil {
			dp.sessions.Clear()
		}
	}
	if n := quiet(); n != 0 {
		t.Fatalf("%d quiet partitions listed after their sessions went", n)
	}
}

// TestQuietConsumerPartitionsWake: the idle partitions of a consumer's fetch session
// go quiet (its requests leave them out) and a moved HW wakes them: with the
// periodic rescan put off for the whole test, a quiet partition's records would never
// be read without the wake. A record produced to one quiet partition reaches the
// consumer, then one to every partition, and a read_committed consumer's partition
// quiet at the LSO wakes when the transaction commits, not before.
func TestQuietConsumerPartitionsWake(t *testing.T) {
	old := quietRescan
	quietRescan = time.Hour
	defer func() { quietRescan = old }()
	const parts = 12
	tb := startDataBroker(t)
	ctx, cancelAll := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelAll()
	if r, err := tb.admin(t).CreateTopic(ctx, parts, 1, nil, "cquiet"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	prod := tb.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cons := tb.client(t, kgo.ConsumeTopics("cquiet"), kgo.FetchMaxWait(time.Second))
	rc := tb.client(t, kgo.ConsumeTopics("cquiet"), kgo.FetchMaxWait(time.Second), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	polled := func(cl *kgo.Client, n int, within time.Duration) []*kgo.Record {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		var out []*kgo.Record
		for len(out) < n {
			fs := cl.PollFetches(pctx)
			if pctx.Err() != nil {
				t.Fatalf("%d of %d records within %v", len(out), n, within)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
			out = append(out, fs.Records()...)
		}
		return out
	}
	// Both consumers start polling; every partition of both sessions goes quiet.
	go func() {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		cons.PollFetches(pctx)
		cancel()
	}()
	go func() { pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond); rc.PollFetches(pctx); cancel() }()
	allQuiet := func(what string) {
		eventually(t, 20*time.Second, what, func() bool {
			dp := tb.b.dataPath.Load()
			if dp == nil {
				return false
			}
			_, consumers := dp.sessions.QuietParts()
			return consumers == 2*parts
		})
		checkAwakeLists(t, tb.b.dataPath.Load().sessions)
	}
	allQuiet("every partition of both consumers' sessions to go quiet")

	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "cquiet", Partition: 7, Value: []byte("one")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if r := polled(cons, 1, 10*time.Second); r[0].Partition != 7 || string(r[0].Value) != "one" {
		t.Fatalf("got %+v", r[0])
	}
	if r := polled(rc, 1, 10*time.Second); r[0].Partition != 7 {
		t.Fatalf("read_committed got %+v", r[0])
	}
	allQuiet("the woken partition to go quiet again")

	for p := range int32(parts) {
		prod.Produce(ctx, &kgo.Record{Topic: "cquiet", Partition: p, Value: []byte("all")}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	polled(cons, parts, 10*time.Second)
	polled(rc, parts, 10*time.Second)
	allQuiet("every partition quiet after the second round")

	// A transaction's record: the plain consumer reads it at once; the read_committed
	// one, quiet at the LSO, only once the commit moves the LSO.
	txp := tb.client(t, kgo.TransactionalID("cquiet-tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txp.ProduceSync(ctx, &kgo.Record{Topic: "cquiet", Partition: 3, Value: []byte("txn")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if r := polled(cons, 1, 10*time.Second); string(r[0].Value) != "txn" {
		t.Fatalf("got %+v", r[0])
	}
	pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	if fs := rc.PollFetches(pctx); len(fs.Records()) != 0 {
		t.Fatalf("read_committed read an open transaction's record: %+v", fs.Records()[0])
	}
	cancel()
	if err := txp.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if r := polled(rc, 1, 10*time.Second); string(r[0].Value) != "txn" {
		t.Fatalf("read_committed got %+v", r[0])
	}
}

// checkAwakeLists checks every session's awake list: exactly its parts neither quiet
// nor removed, each at the index it records.
func checkAwakeLists(t *testing.T, c *fetchsession.Cache) {
	t.Helper()
	if err := c.Check(); err != nil {
		t.Error(err)
	}
}
