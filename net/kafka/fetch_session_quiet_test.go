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
				n += dp.sessions.quiet.quietLen()
			}
		}
		return n
	}
	allQuiet := func(what string) {
		eventually(t, 20*time.Second, what, func() bool { return quiet() == 2*parts })
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
			dp.sessions.mu.Lock()
			ids := make([]int32, 0, len(dp.sessions.m))
			for id := range dp.sessions.m {
				ids = append(ids, id)
			}
			dp.sessions.mu.Unlock()
			for _, id := range ids {
				dp.sessions.remove(id)
			}
		}
	}
	if n := quiet(); n != 0 {
		t.Fatalf("%d quiet partitions listed after their sessions went", n)
	}
}
