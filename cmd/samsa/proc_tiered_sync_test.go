package main

// A wiped follower of a tiered partition (issue 34): three real nodes over a
// versitygw child process, the follower's copy of the partition deleted while it is
// down. It starts again at its leader's local log start (Kafka's
// OFFSET_MOVED_TO_TIERED_STORAGE and buildRemoteLogAuxState), so it copies the local
// part only; the same partition without tiering is copied whole.

import (
	"bufio"
	"cmp"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/internal/s3test"
)

// wipedSync is one partition's wiped-follower syncs and what they copied.
type wipedSync struct {
	took     []time.Duration // restart of the wiped node 3 to it back in the ISR
	copied   []int64         // record bytes its leader sent to followers meanwhile
	onDisk   []int64         // node 3's segment bytes once back in the ISR
	local    int64           // the leader's segment bytes (its local log) at the wipe
	fill     time.Duration
	localOff int64 // the leader's earliest local offset at the wipe
}

// TestWipedTieredFollower (issue 34): a partition of RF 3 (replicas 1, 2, 3, leader 1)
// on three combined nodes, filled with 16 KiB records (acks=all). Tiered: the
// partition has remote.storage.enable, a remote part of 64 MiB and local.retention.bytes
// of 8 MiB; once its copies are in the store and the local log is down to its local
// part, node 3 is SIGKILLed, its copy of the partition deleted (its directory
// logs/<topic>-0: the node's metadata and other partitions stay) and started again.
// Timed from the restart to node 3 back in the ISR on every broker's Metadata; the
// bytes copied are the leader's samsa_topic_replication_bytes_out_total meanwhile. It
// must copy about the local part, not the remote one; then node 3 is made the leader
// and every acknowledged record reads back through it, the remote part from the
// store. Full: the same partition (72 MiB) without tiering, node 3 wiped the same way
// and copied whole, for the ratio of the times.
//
// With SAMSA_CLUSTER_BENCH=1 it measures at SAMSA_CLUSTER_BENCH_TIERED_REMOTE_MIB
// (4096) and _LOCAL_MIB (256), the size, against a full sync of the same
// partition, SAMSA_CLUSTER_BENCH_TIERED_FULL_MIB (4352), SAMSA_CLUSTER_BENCH_SYNCS (3)
// syncs of each; the read-back is left out. The full part's three replicas take about
// 13 GiB of disk:
//
//	SAMSA_CLUSTER_BENCH=1 go test ./cmd/samsa -run '^TestWipedTieredFollower$' -v -count=1 -timeout 30m
func TestWipedTieredFollower(t *testing.T) {
	remoteMiB, localMiB, fullMiB, syncs, check := 64, 8, 72, 1, true
	if os.Getenv("SAMSA_CLUSTER_BENCH") == "1" {
		remoteMiB = benchSize("SAMSA_CLUSTER_BENCH_TIERED_REMOTE_MIB", 4096)
		localMiB = benchSize("SAMSA_CLUSTER_BENCH_TIERED_LOCAL_MIB", 256)
		fullMiB = benchSize("SAMSA_CLUSTER_BENCH_TIERED_FULL_MIB", 4352)
		syncs, check = benchSize("SAMSA_CLUSTER_BENCH_SYNCS", 3), false
	}
	// Segments of an eighth of the local part, 4 MiB at least: a copy to the store
	// costs about half a second whatever its size here, one at a time.
	segment := max(localMiB/8, 4) << 20
	var tiered, full wipedSync
	t.Run("tiered", func(t *testing.T) {
		tiered = runWipedSync(t, true, remoteMiB+localMiB, localMiB, segment, syncs, check)
	})
	t.Run("full", func(t *testing.T) {
		full = runWipedSync(t, false, fullMiB, 0, segment, syncs, check)
	})
	if len(tiered.took) == 0 || len(full.took) == 0 {
		return
	}
	tm, fm := medianOf(tiered.took), medianOf(full.took)
	t.Logf("wiped follower of %d MiB remote + %d MiB local: median %v to the ISR, %s MiB copied (the leader's local log %.1f MiB); full sync of %d MiB without tiering: median %v; ratio %.3f (per MiB of partition %.3f)",
		remoteMiB, localMiB, tm.Round(time.Millisecond), mibs(tiered.copied), float64(tiered.local)/(1<<20), fullMiB, fm.Round(time.Millisecond),
		tm.Seconds()/fm.Seconds(), (tm.Seconds()/float64(remoteMiB+localMiB))/(fm.Seconds()/float64(fullMiB)))
}

// checkTieredPath checks that node 3's log from byte from on (its restart) shows it
// took OFFSET_MOVED_TO_TIERED_STORAGE's path: it rebuilt its state from remote
// storage and fetched from the leader's earliest local offset, which it asked for.
func checkTieredPath(t *testing.T, sync int, path string, from int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b[min(from, int64(len(b))):]), "\n") {
		if strings.Contains(l, "follower fetch offset moved to tiered storage") || strings.Contains(l, "follower state rebuilt from remote storage") {
			lines = append(lines, l)
		}
	}
	if len(lines) < 2 {
		t.Fatalf("sync %d: node 3's log since its restart shows no OFFSET_MOVED_TO_TIERED_STORAGE path (%d lines of it)", sync, len(lines))
	}
	for _, l := range lines {
		t.Logf("sync %d: node 3: %s", sync, l)
	}
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func mibs(ns []int64) string {
	var parts []string
	for _, n := range ns {
		parts = append(parts, fmt.Sprintf("%.1f", float64(n)/(1<<20)))
	}
	return strings.Join(parts, ", ")
}

// runWipedSync creates the partition (tiered or not), fills it with mib MiB and wipes
// and restarts node 3 syncs times; with check, node 3 then leads and every
// acknowledged record is read back.
func runWipedSync(t *testing.T, tiered bool, mib, localMiB, segment, syncs int, check bool) wipedSync {
	spec := combined(3)
	const topic = "wiped"
	configs := map[string]*string{"segment.bytes": ptr(strconv.Itoa(segment)), "retention.ms": ptr("-1")}
	if tiered {
		g := s3test.Start(t)
		g.MakeBucket(t, "tiered")
		spec = specWith(spec, tieredProcKeys(g, "tiered", 30*time.Second, 10*time.Second))
		spec.Keys["remote.log.manager.task.interval.ms"] = "100"
		// Segments past local retention are renamed *.deleted and removed a second
		// later, not a minute (the default): the fill's steps wait for the disk.
		spec.Keys["log.segment.delete.delay.ms"] = "1000"
		configs["remote.storage.enable"] = ptr("true")
		configs["local.retention.bytes"] = ptr(strconv.Itoa(localMiB << 20))
	}
	c := startProcCluster(t, spec)
	wait := time.Duration(mib/2+60) * time.Second // 2 MiB/s to the store at least
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	cl := client(t, c.Bootstrap(), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedBytes(64<<20), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{1, 2, 3}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	for k, v := range configs {
		rc := kmsg.NewCreateTopicsRequestTopicConfig()
		rc.Name, rc.Value = k, v
		rt.Configs = append(rt.Configs, rc)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	view := func(want []int32, leader int32, skip ...int32) func() error {
		return func() error {
			v, err := sameEverywhere(ctx, c.brokerAddrs(skip...), topic, 1)
			if err != nil {
				return err
			}
			if !slices.Equal(v[0].ISR, want) || (leader > 0 && v[0].Leader != leader) {
				return fmt.Errorf("leader %d, ISR %v; want %d, %v", v[0].Leader, v[0].ISR, leader, want)
			}
			return nil
		}
	}
	eventually(t, 30*time.Second, "the topic on every broker", view([]int32{1, 2, 3}, 1))

	// Fill: 16 KiB records, a number then random bytes, uncompressed, acks=all.
	const recSize = 16 << 10
	pad := make([]byte, recSize-10)
	crand.Read(pad)
	n := mib << 20 / recSize
	var r wipedSync
	var acks []ack
	var failed error
	var mu sync.Mutex
	// A tiered partition is filled in steps of half its local part (32 MiB at least),
	// each once the copies and local retention have caught up with the last on every
	// node: the disk holds the store's copy and about the local part three times, not
	// the whole partition three times.
	step := n
	if tiered {
		step = max(localMiB/2, 32) << 20 / recSize
	}
	dirs := []string{filepath.Join(c.Node(1).Dir, "logs", topic+"-0"), filepath.Join(c.Node(2).Dir, "logs", topic+"-0"),
		filepath.Join(c.Node(3).Dir, "logs", topic+"-0")}
	start := time.Now()
	for i := range n {
		if i > 0 && i%step == 0 {
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			eventually(t, wait, "local retention on every node", func() error {
				for _, d := range dirs {
					if b := dirBytes(d); b > int64(localMiB<<20+2*segment) {
						return fmt.Errorf("%s: %d bytes of segments", d, b)
					}
				}
				return nil
			})
		}
		v := append([]byte(fmt.Sprintf("r-%08d", i)), pad...)
		cl.Produce(ctx, &kgo.Record{Value: v}, func(rec *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = cmp.Or(failed, err)
			} else if check {
				acks = append(acks, ack{Partition: rec.Partition, Offset: rec.Offset, Value: string(rec.Value)})
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if failed != nil {
		t.Fatal(failed)
	}
	r.fill = time.Since(start)
	t.Logf("fill: %d records of 16 KiB (%d MiB) acks=all on 3 replicas in %v (steps of %d MiB)", n, mib, r.fill.Round(time.Millisecond), step*recSize>>20)

	adm := kadm.NewClient(cl)
	leaderDir, partDir := dirs[0], dirs[2]
	if tiered {
		// The copies made and the local log down to its local part: the copies reach
		// the earliest local offset (the local part is copied too), and the leader's
		// segments are within local.retention.bytes and the active segment.
		e := &outageEnv{cl: cl, topic: topic}
		eventually(t, wait, "the copies made and the local log deleted down to local.retention.bytes", func() error {
			tieredOff, err := e.listOffset(ctx, -5)
			if err != nil {
				return err
			}
			local, err := e.listOffset(ctx, -4)
			if err != nil {
				return err
			}
			b := logBytesOf(leaderDir)
			if local == 0 || tieredOff < local-1 || b > int64(localMiB<<20+segment) {
				return fmt.Errorf("latest tiered %d, earliest local %d, the leader's segments %d bytes", tieredOff, local, b)
			}
			r.localOff = local
			return nil
		})
		t.Logf("copies made and the local log deleted %v after the fill: earliest local offset %d of %d", time.Since(start)-r.fill, r.localOff, n)
	}
	r.local = logBytesOf(leaderDir)
	for i := range syncs {
		c.Kill(3)
		eventually(t, time.Minute, "node 3 out of the ISR", view([]int32{1, 2}, 1, 3))
		if err := os.RemoveAll(partDir); err != nil {
			t.Fatal(err)
		}
		sent := metricOf(t, c.Node(1).Admin, "samsa_topic_replication_bytes_out_total", topic)
		logPath := filepath.Join(c.Node(3).Dir, "samsa.log")
		logFrom := int64(0)
		if fi, err := os.Stat(logPath); err == nil {
			logFrom = fi.Size()
		}
		start := time.Now()
		if err := c.Start(3); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Minute, "node 3 back in the ISR", view([]int32{1, 2, 3}, 1))
		d := time.Since(start)
		copied := int64(metricOf(t, c.Node(1).Admin, "samsa_topic_replication_bytes_out_total", topic) - sent)
		onDisk := logBytesOf(partDir)
		r.took, r.copied, r.onDisk = append(r.took, d), append(r.copied, copied), append(r.onDisk, onDisk)
		t.Logf("sync %d: node 3 wiped and restarted, back in the ISR after %v; the leader sent %.1f MiB to followers, node 3 holds %.1f MiB of segments (the leader %.1f MiB)",
			i, d.Round(time.Millisecond), float64(copied)/(1<<20), float64(onDisk)/(1<<20), float64(r.local)/(1<<20))
		if onDisk < r.local {
			t.Fatalf("sync %d: node 3 in the ISR holding %d bytes of segments, the leader %d", i, onDisk, r.local)
		}
		if tiered && (copied > r.local+int64(segment) || onDisk > r.local+int64(segment)) {
			t.Fatalf("sync %d: node 3 copied %d bytes (holds %d) of a partition whose local part is %d bytes: more than the local part", i, copied, onDisk, r.local)
		}
		if !tiered && copied < int64(mib)<<20 {
			t.Fatalf("sync %d: node 3 copied %d bytes of a %d MiB partition", i, copied, mib)
		}
		if tiered {
			checkTieredPath(t, i, logPath, logFrom)
		}
	}
	if !check {
		return r
	}
	// Node 3 leads (first in the replica list, the preferred leader elected) and every
	// acknowledged record reads back through it, from offset 0.
	var ra2 kadm.AlterPartitionAssignmentsReq
	ra2.Assign(topic, 0, []int32{3, 1, 2})
	if rs, err := adm.AlterPartitionAssignments(ctx, ra2); err != nil || rs.Error() != nil {
		t.Fatalf("reassign to 3, 1, 2: %v %v", err, rs.Error())
	}
	eventually(t, time.Minute, "node 3 the leader", func() error {
		rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			return err
		}
		for _, ps := range rs {
			for _, p := range ps {
				if p.Err != nil && !errors.Is(p.Err, kerr.ElectionNotNeeded) {
					return p.Err
				}
			}
		}
		return view([]int32{1, 2, 3}, 3)()
	})
	got := readAll(t, c.Bootstrap(), topic)
	checkAcked(t, acks, got)
	if len(acks) != n || len(got[0]) != n {
		t.Fatalf("%d records produced, %d acknowledged, %d read back", n, len(acks), len(got[0]))
	}
	t.Logf("node 3 leads: %d acknowledged records read back from offset 0 (%d below its local log start)", len(acks), r.localOff)
	return r
}

func ptr(s string) *string { return &s }

// logBytesOf sums the .log segments of a copy of a partition.
func logBytesOf(dir string) int64 {
	ms, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var n int64
	for _, m := range ms {
		if st, err := os.Stat(m); err == nil {
			n += st.Size()
		}
	}
	return n
}

// dirBytes sums the files of a directory (segments renamed *.deleted included).
func dirBytes(dir string) int64 {
	es, _ := os.ReadDir(dir)
	var n int64
	for _, e := range es {
		if fi, err := e.Info(); err == nil && !e.IsDir() {
			n += fi.Size()
		}
	}
	return n
}

// metricOf reads a counter of the topic (its line with topic="topic") from the admin
// listener's /metrics.
func metricOf(t *testing.T, admin, name, topic string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, `topic="`+topic+`"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return 0
}
