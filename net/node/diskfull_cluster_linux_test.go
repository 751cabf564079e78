package node

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterFullDiskFencesNode: on three nodes, one whose log dir fills up asks to
// be fenced: its leaderships move and it leaves the ISRs, so acks=all produces with
// min.insync.replicas=2 go on while its disk is full (before, they stopped for
// replica.lag.time.max.ms, 30 s). Once space is freed it is unfenced, catches up and
// is back in every ISR; every acknowledged record is read back.
func TestClusterFullDiskFencesNode(t *testing.T) {
	logDir := mountTmpfs(t, 32<<20)
	nodes := inProcessClusterWith(t, 3, func(i int, keys map[string]string) {
		keys["min.insync.replicas"] = "2"
		keys["offsets.topic.num.partitions"] = "1"
		if i == 0 {
			keys["log.dirs"] = logDir
		}
	})
	const topic = "fullc"
	cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[1].Addr(), nodes[2].Addr()), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.MetadataMinAge(200*time.Millisecond)) // a moved leadership found at once
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	// state reports node 1's leaderships and ISR memberships, as node 2 sees them (a
	// request of its own: kgo answers Metadata requests from a cache up to
	// MetadataMinAge old).
	state := func() (leads, inISR, parts int, err error) {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		md, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
		if err != nil {
			return 0, 0, 0, err
		}
		if len(md.Topics) != 1 {
			return 0, 0, 0, fmt.Errorf("%d topics", len(md.Topics))
		}
		for _, p := range md.Topics[0].Partitions {
			parts++
			if p.Leader == 1 {
				leads++
			}
			if slices.Contains(p.ISR, 1) {
				inISR++
			}
		}
		return leads, inISR, parts, nil
	}
	waitFor(t, 30*time.Second, "node 1 leading and in every ISR", func() error {
		leads, in, parts, err := state()
		if err != nil || leads == 0 || in != 3 || parts != 3 {
			return fmt.Errorf("leads %d, in %d of %d ISRs: %v", leads, in, parts, err)
		}
		return nil
	})
	payload := []byte(strings.Repeat("v", 4<<10))
	acked := 0
	produce := func(n int) {
		t.Helper()
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: payload}).FirstErr(); err != nil {
				t.Fatalf("produce (acks=all) after %d acknowledged: %v", acked, err)
			}
			acked++
		}
	}
	produce(6)

	t0 := time.Now()
	filler := fill(t, logDir, 16<<10)
	// Produces go on (kgo retries the refused ones) and node 1 leaves the service once
	// an append finds its disk full.
	var (
		bg     sync.WaitGroup
		bgDone = make(chan struct{})
		bgErr  error
		bgAck  int
	)
	bg.Add(1)
	go func() {
		defer bg.Done()
		for {
			select {
			case <-bgDone:
				return
			default:
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: payload}).FirstErr(); err != nil {
				bgErr = err
				return
			}
			bgAck++
		}
	}()
	waitFor(t, 30*time.Second, "node 1 fenced: leading nothing, in no ISR", func() error {
		leads, in, _, err := state()
		if err != nil || leads != 0 || in != 0 {
			return fmt.Errorf("leads %d, in %d ISRs: %v", leads, in, err)
		}
		return nil
	})
	t.Logf("node 1 fenced %v after its disk filled up", time.Since(t0))
	close(bgDone)
	bg.Wait()
	if bgErr != nil {
		t.Fatalf("produce (acks=all) while node 1 filled up, after %d acknowledged: %v", bgAck, bgErr)
	}
	acked += bgAck
	start := time.Now()
	produce(30)
	t.Logf("with node 1's disk full: 30 acks=all produces in %v", time.Since(start))

	start = time.Now()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "node 1 back in every ISR", func() error {
		_, in, parts, err := state()
		if err != nil || in != parts {
			return fmt.Errorf("in %d of %d ISRs: %v", in, parts, err)
		}
		return nil
	})
	t.Logf("node 1 back in every ISR %v after space was freed", time.Since(start))
	produce(6)
	c, err := kgo.NewClient(kgo.SeedBrokers(nodes[0].Addr()), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := 0
	for got < acked {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d acknowledged records: %v", got, acked, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got += fs.NumRecords()
	}
	if got != acked {
		t.Fatalf("read %d records, %d acknowledged", got, acked)
	}
}
