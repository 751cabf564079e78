package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// filled is pc.req's partitions as partition: records in its batch.
func filled(pc *pacedConn) [][2]int32 {
	var out [][2]int32
	for _, p := range pc.req.Topics[0].Partitions {
		out = append(out, [2]int32{p.Partition, int32(binary.BigEndian.Uint32(p.Records[57:]))})
	}
	return out
}

func testPacedConn(sticky bool, perBatch int, parts ...int32) *pacedConn {
	req := kmsg.NewPtrProduceRequest()
	req.Topics = []kmsg.ProduceRequestTopic{kmsg.NewProduceRequestTopic()}
	return &pacedConn{req: req, parts: parts, value: []byte("v"), batches: map[int][]byte{}, sticky: sticky, perBatch: perBatch}
}

// TestPacedFill: keyless records go a batch (at most perBatch records) to a
// partition, the next batch to the next; keyed ones one record at a time; both carry
// on from where the last request ended.
func TestPacedFill(t *testing.T) {
	pc := testPacedConn(true, 4, 1, 2, 3)
	for _, step := range []struct {
		n    int
		want [][2]int32
	}{
		{10, [][2]int32{{1, 4}, {2, 4}, {3, 2}}},
		{1, [][2]int32{{1, 1}}},
		{3, [][2]int32{{2, 3}}},
	} {
		pc.fill(step.n, 0)
		if got := filled(pc); !slices.Equal(got, step.want) {
			t.Fatalf("sticky, %d records: %v, want %v", step.n, got, step.want)
		}
	}
	pc = testPacedConn(false, 4, 1, 2, 3)
	for _, step := range []struct {
		n    int
		want [][2]int32
	}{
		{5, [][2]int32{{1, 2}, {2, 2}, {3, 1}}},
		{2, [][2]int32{{3, 1}, {1, 1}}},
		{1, [][2]int32{{2, 1}}},
	} {
		pc.fill(step.n, 0)
		if got := filled(pc); !slices.Equal(got, step.want) {
			t.Fatalf("spread, %d records: %v, want %v", step.n, got, step.want)
		}
	}
	// A connection's share: every conns-th partition, the rate in proportion.
	tmpl := kmsg.NewPtrProduceRequest()
	tmpl.Topics = []kmsg.ProduceRequestTopic{{Topic: "t"}}
	w := &Workload{ProducerRate: 1000, KeyDistributor: KeyNone}
	share := newPacedConn(nil, tmpl, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, 3, 20, w, []byte("v"), 8)
	if !slices.Equal(share.parts, []int32{1, 4, 7}) || share.rate != 150 || !share.sticky || share.req.Topics[0].Topic != "t" {
		t.Fatalf("share: partitions %v, rate %v, sticky %v", share.parts, share.rate, share.sticky)
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(pc.batch(3, 0)); err != nil || rb.NumRecords != 3 {
		t.Fatalf("a cached batch: %v, %d records", err, rb.NumRecords)
	}
}

// TestRawPacedKfake: the paced mode sends no more than its schedule, every
// acknowledged record of the window has a publish latency of its own, and the
// result says what it aimed at.
func TestRawPacedKfake(t *testing.T) {
	ctx := context.Background()
	tg, w := startKfakeE2E(t)
	w.ProducerRate = 2000
	w.KeyDistributor = KeyNone
	start := time.Now()
	r, err := RunRaw(ctx, RawConfig{Workload: w, Brokers: tg.Brokers, Target: "kfake", Duration: 2 * time.Second, Warmup: time.Second, Paced: true})
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	if r.Mode != "raw" || r.RawRate != 2000 || r.Acked == 0 || r.Errors != 0 || r.Consumed > r.Acked {
		t.Fatalf("paced result: rate %d, acked %d, consumed %d, errors %d", r.RawRate, r.Acked, r.Consumed, r.Errors)
	}
	// A connection's schedule issues at most one record more than rate × time.
	if limit := int64(2000*elapsed.Seconds()) + int64(w.Producers()); r.Acked > limit {
		t.Errorf("acked %d records in %v at 2000/s (at most %d)", r.Acked, elapsed, limit)
	}
	inWindow := r.PubRate * r.DurationSec
	if n := float64(r.PublishLatency.Count); n < inWindow/2 || n > inWindow*1.5 {
		t.Errorf("%v latencies for %.0f records acknowledged in the window: not one per record", n, inWindow)
	}
	if r.PublishLatencyUncorrected.Count == 0 {
		t.Error("no uncorrected latency")
	}
	if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, " paced: 2000 msg/s") }) {
		t.Errorf("notes %q", r.Notes)
	}

	w.ProducerRate = 0
	if _, err := RunRaw(ctx, RawConfig{Workload: w, Brokers: tg.Brokers, Paced: true, Duration: time.Second}); !errors.Is(err, ErrRun) {
		t.Errorf("paced without a rate: %v", err)
	}
	w.ProducerRate, w.ConsumerBacklogSizeGB = 1000, 0.001
	if _, err := RunRaw(ctx, RawConfig{Workload: w, Brokers: tg.Brokers, Paced: true, Duration: time.Second}); !errors.Is(err, ErrRun) {
		t.Errorf("paced on a backlog workload: %v", err)
	}
}
