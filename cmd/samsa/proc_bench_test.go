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
	"cmp"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// TestClusterBenchFullSync measures a follower's full sync of a 1 GiB partition on a
// cluster of three combined nodes, two ways, alternated A B A B:
//
//   - reassignment: the partition (replicas 1, 2; leader 1) gets node 3 as a new
//     replica through AlterPartitionReassignments; timed from the request to node 3
//     in the ISR (every broker's Metadata), the reassignment no longer listed and
//     node 3's copy complete. To run it again, node 3 is removed from the replicas
//     and its copy deleted.
//   - wiped follower: node 3 (a replica in the ISR) is SIGKILLed, its copy of the
//     partition deleted, and restarted; timed from the restart to node 3 back in the
//     ISR with a complete copy (the node's start-up, registration and unfencing
//     included).
//
// A copy is complete when node 3's segment files hold as many bytes as the leader's.
// Run with:
//
//	SAMSA_CLUSTER_BENCH=1 go test ./cmd/samsa -run '^TestClusterBenchFullSync$' -v -count=1 -timeout 30m
//
// SAMSA_CLUSTER_BENCH_SYNC_MIB (1024) sets the partition's size, _SYNCS (4) the
// number of syncs.
func TestClusterBenchFullSync(t *testing.T) {
	if os.Getenv("SAMSA_CLUSTER_BENCH") != "1" {
		t.Skip("set SAMSA_CLUSTER_BENCH=1 to measure the cluster's figures")
	}
	mib := benchSize("SAMSA_CLUSTER_BENCH_SYNC_MIB", 1024)
	syncs := benchSize("SAMSA_CLUSTER_BENCH_SYNCS", 4)
	t.Logf("machine: %d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	c := startProcCluster(t, combined(3))
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	const topic = "fullsync"
	partDir := filepath.Join(c.Node(3).Dir, "logs", topic+"-0")

	cl := client(t, c.Bootstrap(), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedBytes(64<<20), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{1, 2}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	isr := func(want []int32) func() error {
		return func() error {
			v, err := sameEverywhere(ctx, c.brokerAddrs(), topic, 1)
			if err != nil {
				return err
			}
			if !slices.Equal(v[0].ISR, want) {
				return fmt.Errorf("ISR %v, want %v", v[0].ISR, want)
			}
			return nil
		}
	}
	eventually(t, 30*time.Second, "the topic on every broker", isr([]int32{1, 2}))

	// Fill: 16 KiB records of random bytes, uncompressed, to 1 GiB, acks=all on
	// replicas 1, 2.
	const recSize = 16 << 10
	value := make([]byte, recSize)
	crand.Read(value)
	n := mib << 20 / recSize
	var failed error
	var mu sync.Mutex
	start := time.Now()
	for range n {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed = cmp.Or(failed, err)
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if failed != nil {
		t.Fatal(failed)
	}
	fill := time.Since(start)
	t.Logf("fill: %d records of %d KiB (%d MiB) acks=all on replicas 1,2 in %v: %.0f MiB/s",
		n, recSize>>10, mib, fill.Round(time.Millisecond), float64(mib)/fill.Seconds())

	adm := kadm.NewClient(cl)
	reassign := func(replicas []int32) {
		var r kadm.AlterPartitionAssignmentsReq
		r.Assign(topic, 0, replicas)
		rs, err := adm.AlterPartitionAssignments(ctx, r)
		if err == nil {
			err = rs.Error()
		}
		if err != nil {
			t.Fatalf("reassign to %v: %v", replicas, err)
		}
	}
	done := func() error {
		l, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			return err
		}
		if len(l) > 0 {
			return fmt.Errorf("still reassigning: %+v", l)
		}
		return nil
	}
	// logBytes sums the .log segments of a copy of the partition.
	logBytes := func(dir string) int64 {
		ms, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		var n int64
		for _, m := range ms {
			if st, err := os.Stat(m); err == nil {
				n += st.Size()
			}
		}
		return n
	}
	leaderBytes := logBytes(filepath.Join(c.Node(1).Dir, "logs", topic+"-0"))
	if leaderBytes < int64(mib)<<20 {
		t.Fatalf("the leader's copy holds %d bytes of segments, less than the %d MiB produced", leaderBytes, mib)
	}
	// complete waits until node 3, in the ISR, holds as many bytes of segments as the
	// leader and returns how long that took after its ISR join (0: it held them).
	// A replica in the ISR without the data is a replication fault that acks=all
	// would count on (it was: a long poll parked before node 3's removal, answered
	// after its re-addition, counted its old offset); it fails the test, and the
	// figure is then the time to the complete copy.
	early := 0
	complete := func(i int) time.Duration {
		got := logBytes(partDir)
		if got == leaderBytes {
			return 0
		}
		early++
		t.Errorf("sync %d: FAULT: node 3 joined the ISR holding %d bytes of segments, the leader %d; the leader's log (end, without raft's lines):\n%s",
			i, got, leaderBytes, c.logTail(1, 30, "component=raft"))
		return eventually(t, 10*time.Minute, "node 3's copy complete", func() error {
			if got := logBytes(partDir); got != leaderBytes {
				return fmt.Errorf("%d of %d bytes", got, leaderBytes)
			}
			return nil
		})
	}
	var byReassign, byWipe []time.Duration
	rate := func(d time.Duration) string { return fmt.Sprintf("%.0f MiB/s", float64(mib)/d.Seconds()) }
	for i := range syncs {
		if i%2 == 0 {
			if i > 0 { // back to replicas 1, 2, node 3's copy gone
				reassign([]int32{1, 2})
				eventually(t, time.Minute, "node 3 removed", isr([]int32{1, 2}))
				eventually(t, time.Minute, "node 3's copy deleted", func() error {
					if _, err := os.Stat(partDir); err == nil {
						return fmt.Errorf("%s still there", partDir)
					}
					return nil
				})
			}
			start := time.Now()
			reassign([]int32{1, 2, 3})
			eventually(t, 10*time.Minute, "node 3 in the ISR", isr([]int32{1, 2, 3}))
			eventually(t, time.Minute, "the reassignment done", done)
			inISR := time.Since(start)
			if late := complete(i); late > 0 {
				t.Logf("sync %d: node 3 in the ISR after %v, its copy complete %v later", i, inISR.Round(time.Millisecond), late.Round(time.Millisecond))
			}
			d := time.Since(start)
			byReassign = append(byReassign, d)
			t.Logf("sync %d, new replica by reassignment: %v to the ISR with a complete copy (%s)", i, d.Round(time.Millisecond), rate(d))
		} else {
			c.Kill(3)
			eventually(t, time.Minute, "node 3 out of the ISR", func() error {
				v, err := sameEverywhere(ctx, c.brokerAddrs(3), topic, 1)
				if err != nil {
					return err
				}
				if !slices.Equal(v[0].ISR, []int32{1, 2}) {
					return fmt.Errorf("ISR %v", v[0].ISR)
				}
				return nil
			})
			if err := os.RemoveAll(partDir); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := c.Start(3); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Minute, "node 3 back in the ISR", isr([]int32{1, 2, 3}))
			inISR := time.Since(start)
			if late := complete(i); late > 0 {
				t.Logf("sync %d: node 3 in the ISR after %v, its copy complete %v later", i, inISR.Round(time.Millisecond), late.Round(time.Millisecond))
			}
			d := time.Since(start)
			byWipe = append(byWipe, d)
			t.Logf("sync %d, wiped follower restarted: %v to the ISR with a complete copy (%s)", i, d.Round(time.Millisecond), rate(d))
		}
	}
	summary := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "-"
		}
		s := slices.Clone(ds)
		slices.Sort(s)
		med := s[len(s)/2]
		if len(s)%2 == 0 {
			med = (s[len(s)/2-1] + med) / 2
		}
		return fmt.Sprintf("n=%d min %v median %v (%s) max %v", len(s), s[0].Round(time.Millisecond), med.Round(time.Millisecond), rate(med), s[len(s)-1].Round(time.Millisecond))
	}
	t.Logf("full sync of %d MiB: new replica by reassignment %s; wiped follower restarted %s; the fill (acks=all, 2 replicas) took %v; ISR joins before the copy was complete: %d of %d",
		mib, summary(byReassign), summary(byWipe), fill.Round(time.Millisecond), early, syncs)
}
