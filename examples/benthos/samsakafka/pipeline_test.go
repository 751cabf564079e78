package samsakafka

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = "../../.."

type order struct {
	ID         int    `json:"id"`
	Customer   string `json:"customer"`
	PriceCents int    `json:"price_cents"`
	Quantity   int    `json:"quantity"`
	TotalCents int    `json:"total_cents"`
	Source     string `json:"source"`
}

func orderOf(i int) order {
	return order{ID: i, Customer: fmt.Sprintf("customer-%d", i%17), PriceCents: i%500 + 1, Quantity: i%7 + 1}
}

// TestPipeline runs examples/benthos/pipeline.yaml (samsa_kafka input, a Bloblang
// mapping, samsa_kafka output) against a real Samsa broker: 3,000 orders are in
// topic orders before the pipeline starts; it is stopped abruptly while it copies
// them (batches in flight, offsets not committed) and started again (the same
// consumer group) with a second pipeline of the group joining it (a rebalance), and
// 500 more orders are produced meanwhile. Every order must arrive in orders-enriched, transformed, with
// its key; duplicates are allowed (at least once) and counted; the group's committed
// offsets reach the end of orders.
func TestPipeline(t *testing.T) {
	addr := startBroker(t)
	ctx := ctxFor(t, 3*time.Minute)
	const in, out, group = "orders", "orders-enriched", "orders-enricher"
	const first, second = 3000, 500

	cl := newClient(t, addr, kgo.DefaultProduceTopic(in))
	adm := kadm.NewClient(cl)
	for _, topic := range []string{in, out} {
		if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	produce := func(from, to int) {
		t.Helper()
		recs := make([]*kgo.Record, 0, to-from)
		for i := from; i < to; i++ {
			v, _ := json.Marshal(orderOf(i))
			recs = append(recs, &kgo.Record{Key: []byte("order-" + strconv.Itoa(i)), Value: v})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, first)

	// The reader of orders-enriched: every record checked against the order it
	// came from; seen counts arrivals per order id.
	var (
		mu      sync.Mutex
		seen    = map[int]int{}
		badRecs []string
	)
	reader := newClient(t, addr, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	readCtx, stopReading := context.WithCancel(ctx)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			fs := reader.PollFetches(readCtx)
			if readCtx.Err() != nil {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				var got order
				err := json.Unmarshal(r.Value, &got)
				want := orderOf(got.ID)
				want.Customer = strings.ToUpper(want.Customer)
				want.TotalCents = want.PriceCents * want.Quantity
				src := strings.Split(got.Source, "/")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					badRecs = append(badRecs, fmt.Sprintf("%q: %v", r.Value, err))
				case string(r.Key) != "order-"+strconv.Itoa(got.ID):
					badRecs = append(badRecs, fmt.Sprintf("order %d under key %q", got.ID, r.Key))
				case len(src) != 3 || src[0] != in:
					badRecs = append(badRecs, fmt.Sprintf("order %d: source %q", got.ID, got.Source))
				default:
					got.Source = ""
					if got != want {
						badRecs = append(badRecs, fmt.Sprintf("got %+v, want %+v", got, want))
					}
				}
				seen[got.ID]++
			})
		}
	}()
	distinct := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}

	conf, err := os.ReadFile("../pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SAMSA_BROKERS": addr, "SAMSA_INPUT_TOPIC": in, "SAMSA_OUTPUT_TOPIC": out, "SAMSA_GROUP": group}
	logTo := newTestWriter(t)
	start := func() (stop func(abrupt bool)) {
		t.Helper()
		b := service.NewStreamBuilder()
		b.SetEnvVarLookupFunc(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		b.SetLogger(slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelWarn})))
		if err := b.SetYAML(string(conf)); err != nil {
			t.Fatal(err)
		}
		s, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		// An abrupt stop gives the stream a millisecond: it is terminated with
		// batches in flight and offsets uncommitted, as a crash would leave them.
		return func(abrupt bool) {
			t.Helper()
			within := 30 * time.Second
			if abrupt {
				within = time.Millisecond
			}
			stopCtx, cancel := context.WithTimeout(ctx, within)
			defer cancel()
			if err := s.Stop(stopCtx); err != nil && !abrupt {
				t.Errorf("stopping the pipeline: %v", err)
			}
			if err := <-done; err != nil && err != context.Canceled && !abrupt {
				t.Errorf("the pipeline ended with %v", err)
			}
		}
	}

	// Stopped abruptly while it copies: some of the first orders are through.
	stop := start()
	eventually(t, 60*time.Second, "the first pipeline copies 1,000 orders", func() error {
		if n := distinct(); n < 1000 {
			return fmt.Errorf("%d orders in %s", n, out)
		}
		return nil
	})
	stop(true)
	t.Logf("the first pipeline was stopped abruptly after %d of %d orders", distinct(), first)

	// Two pipelines of the group: the second one's join revokes partitions of the
	// first (a rebalance while orders keep coming).
	stop = start()
	produce(first, first+second/2)
	stop2 := start()
	produce(first+second/2, first+second)
	eventually(t, 90*time.Second, "every order arrives", func() error {
		if n := distinct(); n < first+second {
			return fmt.Errorf("%d of %d orders in %s", n, first+second, out)
		}
		return nil
	})
	stop(false)
	stop2(false)

	// Everything acknowledged was committed: the group's offsets are at the end.
	ends, err := adm.ListEndOffsets(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		c, ok := committed.Lookup(in, e.Partition)
		if !ok || c.At != e.Offset {
			t.Errorf("%s/%d: committed %+v, end %d", in, e.Partition, c, e.Offset)
		}
	})

	stopReading()
	<-readDone
	mu.Lock()
	defer mu.Unlock()
	for _, b := range badRecs {
		t.Error(b)
	}
	dups := 0
	for i := 0; i < first+second; i++ {
		switch n := seen[i]; {
		case n == 0:
			t.Errorf("order %d never arrived", i)
		case n > 1:
			dups += n - 1
		}
	}
	if len(seen) != first+second {
		t.Errorf("%d distinct orders arrived, want %d", len(seen), first+second)
	}
	t.Logf("%d orders in, %d distinct out, %d duplicates (at least once: allowed)", first+second, len(seen), dups)
}

// testWriter sends the pipeline's log lines (warnings and errors) to the test log
// until the test ends.
type testWriter struct {
	t    *testing.T
	mu   *sync.Mutex
	done *bool
}

func newTestWriter(t *testing.T) testWriter {
	w := testWriter{t: t, mu: new(sync.Mutex), done: new(bool)}
	t.Cleanup(func() { w.mu.Lock(); *w.done = true; w.mu.Unlock() })
	return w
}

func (w testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !*w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
