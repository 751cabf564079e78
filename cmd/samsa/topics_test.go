package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
