package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-broker/samsa/internal/s3test"
)

// run1 runs `samsa topics` or `samsa cluster` against addr and returns the exit code
// and output.
func run1(t *testing.T, main func([]string, *bytes.Buffer) int, addr string, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := main(append(args, "--bootstrap-server", addr, "--timeout", "10s"), &out)
	return code, out.String()
}

func topicsCmd(args []string, out *bytes.Buffer) int  { return topicsMain(args, out) }
func clusterCmd(args []string, out *bytes.Buffer) int { return clusterMain(args, out) }

// TestTopicsCommands: create, list, describe, alter, delete and reassign against a
// real broker (one node).
func TestTopicsCommands(t *testing.T) {
	s := startTestServer(t, t.TempDir())
	defer stopTestServer(t, s)
	addr := s.Addr()

	if code, out := run1(t, topicsCmd, addr, "create", "t1", "t2", "--partitions", "3", "--config", "retention.ms=60000"); code != 0 ||
		!strings.Contains(out, "Created topic t1 (3 partitions, replication factor 1)") || !strings.Contains(out, "Created topic t2") {
		t.Fatalf("create: %d\n%s", code, out)
	}
	if code, out := run1(t, topicsCmd, addr, "create", "t3", "--replica-assignment", "1,1"); code != 0 || !strings.Contains(out, "t3 (2 partitions") {
		t.Fatalf("create with an assignment: %d\n%s", code, out)
	}
	if code, _ := run1(t, topicsCmd, addr, "create", "t1"); code != 1 {
		t.Fatalf("create of an existing topic: exit %d", code)
	}
	if code, out := run1(t, topicsCmd, addr, "create", "t1", "--if-not-exists"); code != 0 || !strings.Contains(out, "Topic t1 exists") {
		t.Fatalf("--if-not-exists: %d\n%s", code, out)
	}
	if code, out := run1(t, topicsCmd, addr, "create", "t4", "--replica-assignment", "1,x"); code != 1 || out != "" {
		t.Fatalf("bad assignment: %d\n%s", code, out)
	}
	if code, out := run1(t, topicsCmd, addr, "list"); code != 0 || out != "t1\nt2\nt3\n" {
		t.Fatalf("list: %d\n%q", code, out)
	}
	code, out := run1(t, topicsCmd, addr, "describe", "t1")
	topicLine := regexp.MustCompile(`(?m)^Topic: t1\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=60000$`)
	partLine := regexp.MustCompile(`(?m)^\tTopic: t1\tPartition: 2\tLeader: 1\tReplicas: 1\tIsr: 1\tOffline: \tLogEndOffset: 0\tReplicaLag: 1=0$`)
	if code != 0 || !topicLine.MatchString(out) || !partLine.MatchString(out) {
		t.Fatalf("describe: %d\n%s", code, out)
	}
	if code, out := run1(t, topicsCmd, addr, "describe", "--under-replicated-partitions"); code != 0 || out != "" {
		t.Fatalf("under-replicated on one node: %d\n%s", code, out)
	}
	if code, out := run1(t, topicsCmd, addr, "alter", "t1", "--partitions", "5", "--config", "segment.bytes=1048576", "--delete-config", "retention.ms"); code != 0 ||
		!strings.Contains(out, "now has 5 partitions") || !strings.Contains(out, "Updated the configs of topic t1") {
		t.Fatalf("alter: %d\n%s", code, out)
	}
	if _, out := run1(t, topicsCmd, addr, "describe", "t1"); !strings.Contains(out, "PartitionCount: 5\tReplicationFactor: 1\tConfigs: segment.bytes=1048576\n") {
		t.Fatalf("describe after alter:\n%s", out)
	}
	if code, _ := run1(t, topicsCmd, addr, "alter", "t1", "--partitions", "2"); code != 1 {
		t.Fatalf("fewer partitions: exit %d", code)
	}
	if code, out := run1(t, topicsCmd, addr, "delete", "t2", "t3"); code != 0 || !strings.Contains(out, "Deleted topic t2.\nDeleted topic t3.") {
		t.Fatalf("delete: %d\n%s", code, out)
	}
	if code, out := run1(t, topicsCmd, addr, "list"); code != 0 || out != "t1\n" {
		t.Fatalf("list after delete: %d\n%q", code, out)
	}
	if code, _ := run1(t, topicsCmd, addr, "delete", "nope"); code != 1 {
		t.Fatalf("delete of a missing topic: exit %d", code)
	}

	// Reassignment: where the broker serves AlterPartitionReassignments (45) the plan
	// is accepted; where it does not yet, the command fails.
	file := filepath.Join(t.TempDir(), "r.json")
	os.WriteFile(file, []byte(`{"version":1,"partitions":[{"topic":"t1","partition":0,"replicas":[1]}]}`), 0o644)
	code, out = run1(t, topicsCmd, addr, "reassign", "--reassignment-json-file", file)
	if serves(t, addr, 45) {
		if code != 0 || !strings.Contains(out, "Reassigning t1-0.") {
			t.Fatalf("reassign: %d\n%s", code, out)
		}
		if code, out := run1(t, topicsCmd, addr, "reassign", "--list"); code != 0 || !strings.HasPrefix(out, "TOPIC") {
			t.Fatalf("reassign --list: %d\n%s", code, out)
		}
	} else if code != 1 {
		t.Fatalf("reassign on a broker without API 45: exit %d\n%s", code, out)
	}
	if code, _ := run1(t, topicsCmd, addr, "reassign"); code != 1 {
		t.Fatalf("reassign without a plan: exit %d", code)
	}
	os.WriteFile(file, []byte(`{"version":2,"partitions":[]}`), 0o644)
	if code, _ := run1(t, topicsCmd, addr, "reassign", "--reassignment-json-file", file); code != 1 {
		t.Fatalf("reassign with a bad file: exit %d", code)
	}
}

// serves reports whether the broker at addr advertises API key.
func serves(t *testing.T, addr string, key int16) bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ok := false
	vs.Each(func(v kadm.BrokerApiVersions) {
		_, _, ok = v.KeyVersions(key)
	})
	return ok
}

func TestClusterDescribe(t *testing.T) {
	s := startTestServer(t, t.TempDir())
	defer stopTestServer(t, s)
	code, out := run1(t, clusterCmd, s.Addr(), "describe")
	host, port, _ := strings.Cut(s.Addr(), ":")
	row := regexp.MustCompile(`(?m)^1\s+` + regexp.QuoteMeta(host) + `\s+` + port + `\s+-\s+no$`)
	if code != 0 || !strings.Contains(out, "Cluster ID:  "+s.ClusterID()+"\n") || !strings.Contains(out, "Controller:  1\n") ||
		!row.MatchString(out) || !strings.Contains(out, "Quorum:") {
		t.Fatalf("describe: %d\n%s", code, out)
	}
}

// describe of a tiered topic: per partition, LocalSize (the leader's local log, as
// DescribeLogDirs answers it: the .log files left after local retention) and
// RemoteSize (the finished copies, from __remote_log_metadata), which the
// broker's samsa_remote_log_size_bytes agrees with.
func TestTopicsDescribeTiered(t *testing.T) {
	g := s3test.Start(t)
	g.MakeBucket(t, "tiered")
	dir := t.TempDir()
	var set []string
	for k, v := range map[string]string{
		"remote.log.storage.system.enable":                     "true",
		"remote.log.manager.task.interval.ms":                  "100",
		"rsm.config.storage.s3.bucket.name":                    "tiered",
		"rsm.config.storage.s3.region":                         "us-east-1",
		"rsm.config.storage.s3.endpoint.url":                   g.Endpoint,
		"rsm.config.storage.s3.path.style.access.enabled":      "true",
		"rsm.config.storage.aws.access.key.id":                 g.Access,
		"rsm.config.storage.aws.secret.access.key":             g.Secret,
		"rsm.config.chunk.size":                                "4194304",
		"rlmm.config.remote.log.metadata.topic.num.partitions": "3",
	} {
		set = append(set, "--set", k+"="+v)
	}
	s := startTestServer(t, dir, set...)
	defer stopTestServer(t, s)
	addr := s.Addr()
	if code, out := run1(t, topicsCmd, addr, "create", "tt", "--partitions", "1", "--config", "remote.storage.enable=true",
		"--config", "segment.bytes=16384", "--config", "local.retention.bytes=0"); code != 0 {
		t.Fatalf("create: %d\n%s", code, out)
	}
	if code, out := run1(t, topicsCmd, addr, "create", "plain", "--partitions", "1"); code != 0 {
		t.Fatalf("create: %d\n%s", code, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("tt"), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(8<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 200)
	for i := range 1000 {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %d: %v", i, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sizes := regexp.MustCompile(`(?m)^\tTopic: tt\tPartition: 0\t.*\tLocalSize: (\d+)\tRemoteSize: (\d+)$`)
	var local, remote, metric int64
	for {
		code, out := run1(t, topicsCmd, addr, "describe", "tt")
		m := sizes.FindStringSubmatch(out)
		if code != 0 || m == nil {
			t.Fatalf("describe: %d\n%s", code, out)
		}
		local, _ = strconv.ParseInt(m[1], 10, 64)
		remote, _ = strconv.ParseInt(m[2], 10, 64)
		metric = remoteLogSizeMetric(t, s.AdminAddr(), "tt")
		if remote > 0 && remote > local && remote == metric && local == localLogBytes(t, dir, "tt-0") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("LocalSize %d (files %d), RemoteSize %d, samsa_remote_log_size_bytes %d\n%s", local, localLogBytes(t, dir, "tt-0"), remote, metric, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A topic not tiered: its lines as before.
	if _, out := run1(t, topicsCmd, addr, "describe", "plain"); strings.Contains(out, "Size:") {
		t.Fatalf("sizes on a topic not tiered:\n%s", out)
	}
}

// remoteLogSizeMetric reads samsa_remote_log_size_bytes of topic's partition 0 from the
// admin listener's /metrics (-1: not there).
func remoteLogSizeMetric(t *testing.T, admin, topic string) int64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^samsa_remote_log_size_bytes\{partition="0",topic="` + regexp.QuoteMeta(topic) + `"\} (\S+)$`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	f, _ := strconv.ParseFloat(string(m[1]), 64)
	return int64(f)
}

// localLogBytes sums the .log files of the log directory named part under dir.
func localLogBytes(t *testing.T, dir, part string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(p)) != part || !strings.HasSuffix(p, ".log") {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
