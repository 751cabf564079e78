package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// pyClients is the Python side of TestProcPythonClientsCluster, for Debian's
// confluent-kafka (librdkafka) and kafka-python:
//
//	produce LIB BOOTSTRAP TOPIC PREFIX N   N values PREFIX-i with acks=all; prints "done"
//	consume LIB BOOTSTRAP TOPIC GROUP      in group GROUP from the start, committing;
//	                                       prints "v VALUE" per record until killed
const pyClients = `
import sys
mode, lib, bootstrap, topic = sys.argv[1:5]
if mode == "produce":
    prefix, n = sys.argv[5], int(sys.argv[6])
    if lib == "confluent":
        from confluent_kafka import Producer
        errs = []
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        def cb(err, msg):
            if err is not None:
                errs.append(err)
        for i in range(n):
            p.produce(topic, ("%s-%d" % (prefix, i)).encode(), on_delivery=cb)
            p.poll(0)
        left = p.flush(30)
        if errs or left:
            sys.exit("confluent produce: %d errors (%s), %d undelivered" % (len(errs), errs[:3], left))
    else:
        import kafka
        p = kafka.KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", linger_ms=5)
        futs = [p.send(topic, ("%s-%d" % (prefix, i)).encode()) for i in range(n)]
        for f in futs:
            f.get(timeout=30)
        p.close()
    print("done", flush=True)
else:
    group = sys.argv[5]
    if lib == "confluent":
        from confluent_kafka import Consumer
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": True, "auto.commit.interval.ms": 200})
        c.subscribe([topic])
        while True:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            print("v", m.value().decode(), flush=True)
    else:
        import kafka
        c = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap.split(","), group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=True,
                                auto_commit_interval_ms=200)
        while True:
            for tp, ms in c.poll(timeout_ms=200).items():
                for m in ms:
                    print("v", m.value.decode(), flush=True)
`

// pyConsumer is a running consumer of pyClients: the distinct values it printed.
type pyConsumer struct {
	lib  string
	mu   sync.Mutex
	seen map[string]bool
	errs syncBuffer // its stderr
}

func (pc *pyConsumer) count() int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return len(pc.seen)
}

func startPyConsumer(t *testing.T, lib, bootstrap, topic, group string) *pyConsumer {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", "-c", pyClients, "consume", lib, bootstrap, topic, group)
	cmd.SysProcAttr = childSysProcAttr()
	pc := &pyConsumer{lib: lib, seen: map[string]bool{}}
	cmd.Stderr = &pc.errs
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "v "); ok {
				pc.mu.Lock()
				pc.seen[v] = true
				pc.mu.Unlock()
			}
		}
	}()
	return pc
}

// groupCoordinator asks the cluster which broker coordinates group.
func groupCoordinator(ctx context.Context, bootstrap, group string) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if len(resp.Coordinators) == 1 {
		c := resp.Coordinators[0]
		if c.ErrorCode != 0 {
			return -1, fmt.Errorf("FindCoordinator %s: error %d", group, c.ErrorCode)
		}
		return c.NodeID, nil
	}
	if resp.ErrorCode != 0 {
		return -1, fmt.Errorf("FindCoordinator %s: error %d", group, resp.ErrorCode)
	}
	return resp.NodeID, nil
}

// TestProcPythonClientsCluster: kcat, confluent-kafka (librdkafka) and kafka-python
// against a 3-node cluster: each produces to an RF 3 topic, and a consumer group of
// each Python client reads everything, the two groups coordinated by one broker that
// is SIGKILLed while they read: they carry on at the new coordinator and read every
// record.
func TestProcPythonClientsCluster(t *testing.T) {
	if exec.Command("/usr/bin/python3", "-c", "import confluent_kafka, kafka").Run() != nil {
		t.Skip("needs Debian's python3-confluent-kafka and python3-kafka")
	}
	kcat, kcatErr := exec.LookPath("kcat")
	c := startProcCluster(t, specWith(combined(3), map[string]string{"group.initial.rebalance.delay.ms": "0"}))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const topic, n = "pyc", 300
	if err := createTopic(ctx, c.Node(1).Client, topic, 3, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}); err != nil {
		t.Fatal(err)
	}
	bootstrap := c.Bootstrap()
	want := map[string]bool{}
	for _, lib := range []string{"confluent", "kafka-python"} {
		out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", pyClients, "produce", lib, bootstrap, topic, lib, strconv.Itoa(n)).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "done") {
			t.Fatalf("%s producer: %v\n%s", lib, err, out)
		}
		for i := range n {
			want[fmt.Sprintf("%s-%d", lib, i)] = true
		}
	}
	if kcatErr == nil {
		var in strings.Builder
		for i := range n {
			fmt.Fprintf(&in, "kcat-%d\n", i)
			want[fmt.Sprintf("kcat-%d", i)] = true
		}
		cmd := exec.CommandContext(ctx, kcat, "-P", "-b", bootstrap, "-t", topic, "-X", "acks=all")
		cmd.Stdin = strings.NewReader(in.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P: %v\n%s", err, out)
		}
		out, err := exec.CommandContext(ctx, kcat, "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-f", "%s\n").Output()
		if err != nil {
			t.Fatalf("kcat -C: %v", err)
		}
		got := 0
		for _, l := range strings.Split(string(out), "\n") {
			if want[l] {
				got++
			}
		}
		if got != len(want) {
			t.Fatalf("kcat -C read %d of the %d records produced", got, len(want))
		}
	} else {
		t.Log("no kcat: its part skipped")
	}

	// Two groups with one coordinator.
	groupA := "py-confluent"
	coord, err := groupCoordinator(ctx, bootstrap, groupA)
	if err != nil {
		t.Fatal(err)
	}
	groupB := ""
	for i := range 200 {
		g := fmt.Sprintf("py-kafka-python-%d", i)
		if cb, err := groupCoordinator(ctx, bootstrap, g); err == nil && cb == coord {
			groupB = g
			break
		}
	}
	if groupB == "" {
		t.Fatalf("no group name found coordinated by broker %d", coord)
	}
	consumers := []*pyConsumer{
		startPyConsumer(t, "confluent", bootstrap, topic, groupA),
		startPyConsumer(t, "kafka-python", bootstrap, topic, groupB),
	}
	eventually(t, 60*time.Second, "both groups reading", func() error {
		for _, pc := range consumers {
			if pc.count() == 0 {
				return fmt.Errorf("%s: nothing read yet (%s)", pc.lib, pc.errs.String())
			}
		}
		return nil
	})
	// More records after the kill, so that the groups must fetch, commit and rejoin
	// at the new coordinator.
	c.Kill(coord)
	killed := time.Now()
	t.Logf("killed broker %d, coordinator of %s and %s", coord, groupA, groupB)
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", pyClients, "produce", "confluent", bootstrap, topic, "after", strconv.Itoa(n)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "done") {
		t.Fatalf("producer after the kill: %v\n%s", err, out)
	}
	for i := range n {
		want[fmt.Sprintf("after-%d", i)] = true
	}
	eventually(t, 90*time.Second, "every record read by both groups", func() error {
		for _, pc := range consumers {
			pc.mu.Lock()
			missing := 0
			for v := range want {
				if !pc.seen[v] {
					missing++
				}
			}
			pc.mu.Unlock()
			if missing > 0 {
				return fmt.Errorf("%s: %d of %d records not read", pc.lib, missing, len(want))
			}
		}
		return nil
	})
	t.Logf("both groups read all %d records %v after the coordinator's kill (%d of them produced after it)", len(want), time.Since(killed).Round(time.Millisecond), n)
	now, err := groupCoordinator(ctx, bootstrap, groupA)
	if err != nil || now == coord {
		t.Errorf("coordinator of %s after the kill: %d (%v), killed %d", groupA, now, err, coord)
	}
}
