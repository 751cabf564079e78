package node

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsumerOffsetsBounded is a soak, not part of `make test`: a commit loop
// against one node (one group committing new offsets for 50 partitions every 50 ms,
// 1,000 offset records a second) for SAMSA_OFFSETS_SOAK (e.g. 1h), sampling the size
// of __consumer_offsets on disk every SAMSA_OFFSETS_SAMPLE (30 s) beside what the
// commits wrote. The cleaner must keep the log bounded: in the run's second half the
// size stays below a fixed bound (the compacted keys, the active segment and the
// dirty part the cleaner waits for, min.cleanable.dirty.ratio 0.5), far below what was
// written. `make soak-offsets` runs it for an hour; BENCHMARKS.md has the series.
func TestConsumerOffsetsBounded(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("SAMSA_OFFSETS_SOAK"))
	if err != nil || d <= 0 {
		t.Skip("SAMSA_OFFSETS_SOAK=<duration> runs the __consumer_offsets soak")
	}
	sample := 30 * time.Second
	if s, err := time.ParseDuration(os.Getenv("SAMSA_OFFSETS_SAMPLE")); err == nil && s > 0 {
		sample = s
	}
	const segment = 1 << 20
	dir := t.TempDir()
	cfg, err := FromKeys(map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "data.dir": dir, "admin.listen": "127.0.0.1:0",
		"sync": "fsync", "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": fmt.Sprint(segment),
	})
	if err != nil {
		t.Fatal(err)
	}
	nd, err := Start(cfg, Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := nd.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Minute)
	defer cancel()
	if err := nd.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(nd.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const parts = 50
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, "committed"); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		var n int64
		filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() && strings.Contains(path, "__consumer_offsets-") {
				if fi, err := e.Info(); err == nil {
					n += fi.Size()
				}
			}
			return nil
		})
		return n
	}
	// Index files are preallocated as they grow; the figure counts them too, as du would.
	start := time.Now()
	var commits int64
	type point struct {
		at            time.Duration
		size, records int64
	}
	var series []point
	next := start.Add(sample)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for off := int64(1); time.Since(start) < d; off++ {
		<-tick.C
		offs := kadm.Offsets{}
		for p := range int32(parts) {
			offs.Add(kadm.Offset{Topic: "committed", Partition: p, At: off, LeaderEpoch: -1})
		}
		r, err := adm.CommitOffsets(ctx, "bounded-g", offs)
		if err == nil {
			err = r.Error()
		}
		if err != nil {
			t.Fatalf("commit %d: %v", off, err)
		}
		commits += parts
		if now := time.Now(); now.After(next) {
			series = append(series, point{now.Sub(start).Round(time.Second), size(), commits})
			p := series[len(series)-1]
			t.Logf("%8s  __consumer_offsets %7.2f MiB on disk after %d offset records", p.at, float64(p.size)/(1<<20), p.records)
			next = next.Add(sample)
		}
	}
	if len(series) < 4 {
		t.Fatalf("%d samples: run longer than four sample periods", len(series))
	}
	// Bounded: in the second half no sample above 8 segments and 4 MiB of indexes (the
	// cleaned log holds 50 keys; the rest is the active segment, the dirty part below
	// the ratio and segments awaiting deletion).
	var peak int64
	for _, p := range series[len(series)/2:] {
		peak = max(peak, p.size)
	}
	last := series[len(series)-1]
	t.Logf("second half peak %.2f MiB; last %.2f MiB after %d offset records", float64(peak)/(1<<20), float64(last.size)/(1<<20), last.records)
	if peak > 8*segment+(4<<20) {
		t.Errorf("__consumer_offsets reached %.2f MiB in the second half: not kept bounded", float64(peak)/(1<<20))
	}
}
