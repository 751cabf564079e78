package main

// The cluster's figures for BENCHMARKS.md ("Cluster"), measured on a local cluster of
// three combined nodes (child processes on 127.0.0.1):
//
//	SAMSA_CLUSTER_BENCH=1 go test ./cmd/samsa -run '^TestClusterBench$' -v -count=1 -timeout 20m
//
// Off unless SAMSA_CLUSTER_BENCH=1: it takes minutes and its figures are read, not
// checked. SAMSA_CLUSTER_BENCH_TOPICS (500 CreateTopics timed), _PARTITIONS (1,000)
// and _FAILOVERS (5 kills) shrink it for a quick check.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func quantiles(ds []time.Duration) (p50, p99, maxd time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.50), at(0.99), s[len(s)-1]
}

// benchSize reads a size from the environment (def if unset or not a positive integer).
func benchSize(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func TestClusterBench(t *testing.T) {
	if os.Getenv("SAMSA_CLUSTER_BENCH") != "1" {
		t.Skip("set SAMSA_CLUSTER_BENCH=1 to measure the cluster's figures")
	}
	topics := benchSize("SAMSA_CLUSTER_BENCH_TOPICS", 500)
	partitions := benchSize("SAMSA_CLUSTER_BENCH_PARTITIONS", 1000)
	failovers := benchSize("SAMSA_CLUSTER_BENCH_FAILOVERS", 5)
	t.Logf("machine: %d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	// The engine preallocates each log's index files in full (segment.index.bytes, 10
	// MiB each, two per log): 1,500 partitions with three replicas on one machine
	// would take 90 GB. 1 MiB indexes keep the run within the disk.
	c := startProcCluster(t, specWith(combined(3), map[string]string{"log.index.size.max.bytes": "1048576"}))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	t.Run("create-topics-latency", func(t *testing.T) {
		// CreateTopics of one partition, RF 3, sent to a broker that is not the
		// active controller (forwarded, as a client's would be), one at a time.
		leader, err := quorumLeader(ctx, c.Node(1).Client)
		if err != nil {
			t.Fatal(err)
		}
		via := c.Node(leader%3 + 1).Client
		for i := range 20 { // warm-up
			if err := createTopic(ctx, via, fmt.Sprintf("warm-%d", i), 1, 3, nil); err != nil {
				t.Fatal(err)
			}
		}
		var ds []time.Duration
		for i := range topics {
			start := time.Now()
			if err := createTopic(ctx, via, fmt.Sprintf("lat-%d", i), 1, 3, nil); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		p50, p99, mx := quantiles(ds)
		t.Logf("CreateTopics (1 partition, RF 3) through broker at %s, controller %d: n=%d p50 %v p99 %v max %v",
			via, leader, len(ds), p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), mx.Round(10*time.Microsecond))
	})

	t.Run("partitions-rf3", func(t *testing.T) {
		start := time.Now()
		if err := createTopic(ctx, c.Node(1).Client, "thousand", int32(partitions), 3, nil); err != nil {
			t.Fatal(err)
		}
		committed := time.Since(start)
		eventually(t, 2*time.Minute, "every broker shows every partition led", func() error {
			_, err := sameEverywhere(ctx, c.brokerAddrs(), "thousand", partitions)
			return err
		})
		t.Logf("CreateTopics of %d partitions, RF 3: answered after %v; every broker's Metadata shows all %d with leaders after %v",
			partitions, committed.Round(time.Millisecond), partitions, time.Since(start).Round(time.Millisecond))
	})

	t.Run("controller-failover", func(t *testing.T) {
		var ds []time.Duration
		for round := range failovers {
			leader, err := quorumLeader(ctx, c.Node(1).Client)
			if err != nil {
				leader, err = quorumLeader(ctx, c.Node(2).Client)
			}
			if err != nil {
				t.Fatal(err)
			}
			survivor := c.Node(leader%3 + 1).Client
			killed := time.Now()
			c.Kill(leader)
			for i := 0; ; i++ {
				cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
				err := createTopic(cctx, survivor, fmt.Sprintf("fo-%d-%d", round, i), 1, 2, nil)
				ccancel()
				if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
					break
				}
				if time.Since(killed) > time.Minute {
					t.Fatalf("no commit within a minute of the controller's SIGKILL: %v", err)
				}
			}
			ds = append(ds, time.Since(killed))
			if err := c.Start(leader); err != nil {
				t.Fatal(err)
			}
			if err := c.WaitReady(ctx, leader, nil); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(ds)
		t.Logf("controller failover (SIGKILL of the active controller to the first committed CreateTopics): n=%d min %v median %v max %v",
			len(ds), ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	})
}

// TestClusterBenchLeaderFailover measures issue 10's failover time: SIGKILL of a
// partition leader under acks=all load to the producer's next acknowledgement (the
// longest time without one after the kill), over SAMSA_CLUSTER_BENCH_KILLS kills (10),
// each on a fresh cluster of three combined nodes with default settings, half of them
// of a leader that is also the active controller. The producer is franz-go with
// MetadataMinAge 100 ms (see leaderKill), then, when Debian's confluent-kafka-python
// is there, librdkafka with its defaults.
//
//	SAMSA_CLUSTER_BENCH=1 go test ./cmd/samsa -run '^TestClusterBenchLeaderFailover$' -v -count=1 -timeout 30m
func TestClusterBenchLeaderFailover(t *testing.T) {
	if os.Getenv("SAMSA_CLUSTER_BENCH") != "1" {
		t.Skip("set SAMSA_CLUSTER_BENCH=1 to measure the cluster's figures")
	}
	kills := benchSize("SAMSA_CLUSTER_BENCH_KILLS", 10)
	t.Logf("machine: %d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	clients := []struct {
		name string
		load func(t *testing.T) func(bootstrap, topic string) *loadProducer
	}{
		{"franz-go (MetadataMinAge 100 ms)", func(t *testing.T) func(string, string) *loadProducer { return nil }},
	}
	if py := rdkafkaPython(); py != "" {
		clients = append(clients, struct {
			name string
			load func(t *testing.T) func(bootstrap, topic string) *loadProducer
		}{"librdkafka (defaults)", func(t *testing.T) func(string, string) *loadProducer {
			return func(bootstrap, topic string) *loadProducer { return startRdkafkaLoad(t, py, bootstrap, topic) }
		}})
	}
	for _, cl := range clients {
		var all, plain, withCtl []time.Duration
		for i := range kills {
			which, kind := leaderNotController, "leader"
			if i%2 == 1 {
				which, kind = leaderAndController, "leader and controller"
			}
			var r killResult
			t.Run(fmt.Sprintf("kill-%d", i), func(t *testing.T) {
				r = leaderKill(t, nil, which, cl.load(t), cl.name != "librdkafka (defaults)")
			})
			t.Logf("%s, kill %d (%s): no acknowledgement for %v", cl.name, i, kind, r.gap.Round(time.Millisecond))
			all = append(all, r.gap)
			if which == leaderNotController {
				plain = append(plain, r.gap)
			} else {
				withCtl = append(withCtl, r.gap)
			}
		}
		summary := func(ds []time.Duration) string {
			if len(ds) == 0 {
				return "-"
			}
			s := slices.Clone(ds)
			slices.Sort(s)
			return fmt.Sprintf("n=%d min %v median %v max %v", len(s), s[0].Round(time.Millisecond), s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
		}
		t.Logf("%s: leader SIGKILL to the next acknowledgement: all %s; leader only %s; leader and controller %s",
			cl.name, summary(all), summary(plain), summary(withCtl))
	}
}
