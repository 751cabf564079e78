package kafka

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/transport"
)

// cutProxy forwards TCP connections to a broker and can cut them all at once, so
// clients see requests whose answers never came back and retry them.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.cut(); p.wg.Wait() })
	return p
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); io.Copy(s, c); s.Close() }()
		go func() { defer p.wg.Done(); io.Copy(c, s); c.Close() }()
	}
}

// cut closes every proxied connection.
func (p *cutProxy) cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// TestIdempotentRetriesThroughCutConnections has franz-go producers write through a
// proxy that keeps cutting their connections: requests the broker appended but whose
// answers were lost are retried, and must not be written twice.
func TestIdempotentRetriesThroughCutConnections(t *testing.T) {
	dir := t.TempDir()
	bln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, bln.Addr().String())
	port := proxy.ln.Addr().(*net.TCPAddr).Port
	node := startSingleNode(t, dir, Config{NodeID: 1, ClusterID: "test-cluster", Host: "127.0.0.1", Port: int32(port)}, singleNodeOptions{Sync: engine.SyncFsync})
	tr := transport.NewStd(transport.Config{}, node.b, testLogger(t))
	go tr.Serve(bln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tr.Shutdown(ctx)
		node.close()
	})
	addr := proxy.ln.Addr().String()
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx := testCtx(t)
	admin := newClient()
	ct := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = "retry", 2, 1
	ct.Topics = append(ct.Topics, topic)
	if _, err := ct.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	}

	const producers, per = 3, 3000
	var wg sync.WaitGroup
	var acked atomic.Int64
	errs := make(chan error, producers*per)
	for i := range producers {
		cl := newClient(kgo.DefaultProduceTopic("retry"), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(1024),
			kgo.RequestRetries(1000), kgo.RetryBackoffFn(func(int) time.Duration { return time.Millisecond }))
		// The first record, before the cuts start, gets the producer its id.
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%d-0", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 1; j < per; j++ {
				cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%d-%d", i, j))}, func(_ *kgo.Record, err error) {
					if err != nil {
						errs <- err
					}
					acked.Add(1)
				})
			}
			if err := cl.Flush(ctx); err != nil {
				errs <- err
			}
		}()
	}
	stop := make(chan struct{})
	cuts := 0
	var cutWG sync.WaitGroup
	cutWG.Add(1)
	go func() {
		// Cut every connection each time another 150 records were acknowledged, so
		// the producers keep making progress between cuts.
		defer cutWG.Done()
		last := acked.Load()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := acked.Load(); n-last >= 150 {
				proxy.cut()
				cuts++
				last = n
			}
			time.Sleep(time.Millisecond) // polling the acknowledgement count
		}
	}()
	wg.Wait()
	close(stop)
	cutWG.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("produce: %v", err)
	}

	cons := newClient(kgo.ConsumeTopics("retry"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < producers*per {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", len(seen), producers*per)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if seen[string(r.Value)] {
				t.Fatalf("record %q written twice", r.Value)
			}
			seen[string(r.Value)] = true
		})
	}
	var total int64
	for p := int32(0); p < 2; p++ {
		total += node.eng.Log(engine.TopicPartition{Topic: "retry", Partition: p}).LogEndOffset()
	}
	if total != producers*per {
		t.Fatalf("%d records in the logs, want %d (duplicates)", total, producers*per)
	}
	t.Logf("%d connection cuts during %d idempotent records", cuts, producers*per)
}
