package main

// Helpers of the multi-process tests (proc_test.go): the samsa binary built once per
// test binary, clusters of child processes, a producer that records what was
// acknowledged, and an outside reader that checks it.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var testBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testBin.dir != "" {
		os.RemoveAll(testBin.dir)
	}
	os.Exit(code)
}

// samsaBin builds the samsa binary once per test binary (without the race detector:
// the nodes are the system under test, the test binary checks them).
func samsaBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process test: skipped with -short")
	}
	testBin.once.Do(func() {
		testBin.dir, testBin.err = os.MkdirTemp("", "samsa-proc-test-")
		if testBin.err != nil {
			return
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		testBin.path = filepath.Join(testBin.dir, "samsa")
		out, err := exec.Command(goTool, "build", "-o", testBin.path, ".").CombinedOutput()
		if err != nil {
			testBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if testBin.err != nil {
		t.Fatal(testBin.err)
	}
	return testBin.path
}

// startProcCluster creates, formats and starts a cluster of spec in a temporary
// directory and waits until every broker is in Metadata. On failure of the test the
// nodes' logs are printed; the nodes are killed at the end.
func startProcCluster(t *testing.T, spec procSpec) *procCluster {
	t.Helper()
	return startProcClusterOf(t, samsaBin(t), spec)
}

// startProcClusterOf is startProcCluster with the nodes running bin.
func startProcClusterOf(t *testing.T, bin string, spec procSpec) *procCluster {
	t.Helper()
	c, err := newProcCluster(bin, t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.KillAll()
		if t.Failed() {
			for _, n := range c.nodes {
				t.Logf("node %d log (end, without raft's own lines):\n%s", n.ID, c.logTail(n.ID, 80, "component=raft"))
			}
		}
	})
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Every broker's Metadata lists them all: each answers from its own image, which
	// shows another broker's unfencing a moment after the controller's.
	for _, via := range c.Brokers() {
		if err := c.WaitReady(ctx, via, nil); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// eventually polls cond every 20 ms until it returns nil or d passes; it returns the
// time it took, or fails t with cond's last error.
func eventually(t *testing.T, d time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(20 * time.Millisecond) // the poll interval of a deadline-bounded wait
	}
}

// client returns a franz-go client of the cluster (closed at the end of the test).
func client(t *testing.T, bootstrap string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(bootstrap, ",")...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// metadataOf asks the broker at addr (only it) for the metadata of topics.
func metadataOf(ctx context.Context, addr string, topics ...string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, rt)
	}
	return req.RequestWith(ctx, cl.SeedBrokers()[0])
}

// partitionView is what one broker's Metadata says of a partition.
type partitionView struct {
	Leader        int32
	Replicas, ISR []int32
}

// topicView returns, from one Metadata answer, each partition of topic.
func topicView(resp *kmsg.MetadataResponse, topic string) (map[int32]partitionView, error) {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("topic %s: error code %d", topic, t.ErrorCode)
		}
		out := map[int32]partitionView{}
		for _, p := range t.Partitions {
			r, isr := slices.Clone(p.Replicas), slices.Clone(p.ISR)
			slices.Sort(r)
			slices.Sort(isr)
			out[p.Partition] = partitionView{Leader: p.Leader, Replicas: r, ISR: isr}
		}
		return out, nil
	}
	return nil, fmt.Errorf("topic %s not in Metadata", topic)
}

// ack is one acknowledged record.
type ack struct {
	Partition int32
	Offset    int64
	Value     string
	At        time.Time
}

// loadProducer produces numbered records to topic (acks=all, idempotent: franz-go's
// defaults) from one goroutine and remembers every acknowledged one.
type loadProducer struct {
	stop  func()        // ends producing; what is in flight is still answered
	abort func()        // fails what is still in flight
	done  chan struct{} // closed when the producer has ended

	mu      sync.Mutex
	acks    []ack
	errs    []error
	maxGap  time.Duration // the longest time without an acknowledgement
	lastAck time.Time     // the latest acknowledgement, or the start
}

// produced is the promise of every record lp sends: it remembers the acknowledgement
// or the error (a cancelled context's is not one) and the longest gap between two.
func (lp *loadProducer) produced(wg *sync.WaitGroup) func(*kgo.Record, error) {
	return func(r *kgo.Record, err error) {
		defer wg.Done()
		lp.mu.Lock()
		defer lp.mu.Unlock()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				lp.errs = append(lp.errs, err)
			}
			return
		}
		now := time.Now()
		lp.maxGap = max(lp.maxGap, now.Sub(lp.lastAck))
		lp.lastAck = now
		lp.acks = append(lp.acks, ack{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value), At: now})
	}
}

func startLoad(t *testing.T, bootstrap, topic string, opts ...kgo.Opt) *loadProducer {
	t.Helper()
	cl := client(t, bootstrap, append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.MaxBufferedRecords(200),
		kgo.ProducerLinger(time.Millisecond), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	lp := &loadProducer{stop: cancel, abort: cl.Close, done: make(chan struct{}), lastAck: time.Now()}
	go func() {
		defer close(lp.done)
		var wg sync.WaitGroup
		for i := 0; ctx.Err() == nil; i++ {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v-%08d", i))}, lp.produced(&wg))
		}
		wg.Wait()
	}()
	return lp
}

// rdkafkaProducer is a librdkafka producer (confluent-kafka-python) with every
// setting at its default but bootstrap.servers: numbered records to a topic, at most
// 200 unanswered, each delivery written to stdout as "ok PARTITION OFFSET VALUE
// UNIX_NANOS" (or "err ERROR"); it stops producing when stdin closes and flushes.
const rdkafkaProducer = `
import select, sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1]})
topic = sys.argv[2]
out = sys.stdout
def delivered(err, msg):
    if err is None:
        out.write("ok %d %d %s %d\n" % (msg.partition(), msg.offset(), msg.value().decode(), time.time_ns()))
    else:
        out.write("err %s\n" % err)
i = 0
while True:
    r, _, _ = select.select([sys.stdin], [], [], 0)
    if r and not sys.stdin.read(1):
        break
    if len(p) < 200:
        p.produce(topic, ("v-%08d" % i).encode(), callback=delivered)
        i += 1
    p.poll(0.001)
    out.flush()
p.flush(30)
out.flush()
`

// rdkafkaPython is the Python that has confluent_kafka (Debian's), or "".
func rdkafkaPython() string {
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import confluent_kafka").Run(); err != nil {
		return ""
	}
	return py
}

// startRdkafkaLoad is startLoad with rdkafkaProducer as the producer.
func startRdkafkaLoad(t *testing.T, py, bootstrap, topic string) *loadProducer {
	t.Helper()
	return runRdkafkaLoad(t, exec.Command(py, "-c", rdkafkaProducer, bootstrap, topic), "")
}

// runRdkafkaLoad runs a producer script's cmd and reads its deliveries from its
// stdout; its stderr goes to the file logTo ("": kept for the error of a failed exit).
func runRdkafkaLoad(t *testing.T, cmd *exec.Cmd, logTo string) *loadProducer {
	t.Helper()
	cmd.SysProcAttr = childSysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if logTo != "" {
		f, err := os.Create(logTo)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		cmd.Stderr = f
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lp := &loadProducer{stop: func() { stdin.Close() }, abort: func() { cmd.Process.Kill() }, done: make(chan struct{})}
	t.Cleanup(func() { cmd.Process.Kill() })
	go func() {
		defer close(lp.done)
		sc := bufio.NewScanner(stdout)
		last := time.Now()
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			lp.mu.Lock()
			if len(f) == 5 && f[0] == "ok" {
				p, _ := strconv.Atoi(f[1])
				off, _ := strconv.ParseInt(f[2], 10, 64)
				ns, _ := strconv.ParseInt(f[4], 10, 64)
				at := time.Unix(0, ns)
				lp.maxGap = max(lp.maxGap, at.Sub(last))
				last = at
				lp.acks = append(lp.acks, ack{Partition: int32(p), Offset: off, Value: f[3], At: at})
			} else {
				lp.errs = append(lp.errs, errors.New(sc.Text()))
			}
			lp.mu.Unlock()
		}
		if err := cmd.Wait(); err != nil && stderr.Len() > 0 {
			lp.mu.Lock()
			lp.errs = append(lp.errs, fmt.Errorf("%v: %s", err, stderr.String()))
			lp.mu.Unlock()
		}
	}()
	return lp
}

// acked returns how many records were acknowledged so far.
func (lp *loadProducer) acked() int {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return len(lp.acks)
}

// waitAcked waits until n more records than now are acknowledged.
func (lp *loadProducer) waitAcked(t *testing.T, n int, within time.Duration) time.Duration {
	t.Helper()
	want := lp.acked() + n
	return eventually(t, within, fmt.Sprintf("%d more acknowledged records", n), func() error {
		if got := lp.acked(); got < want {
			return fmt.Errorf("%d of %d acknowledged", got, want)
		}
		return nil
	})
}

// waitPartitionAcked waits until a record of partition p is acknowledged after since.
func (lp *loadProducer) waitPartitionAcked(t *testing.T, p int32, since time.Time, within time.Duration) {
	t.Helper()
	eventually(t, within, fmt.Sprintf("a record of partition %d acknowledged", p), func() error {
		lp.mu.Lock()
		defer lp.mu.Unlock()
		for i := len(lp.acks) - 1; i >= 0 && lp.acks[i].At.After(since); i-- {
			if lp.acks[i].Partition == p {
				return nil
			}
		}
		return errors.New("none yet")
	})
}

// finish stops producing and returns the acknowledged records, the longest gap
// between acknowledgements and the errors seen.
//
// Records still in flight get 30 s to be answered; then the client is closed, which
// fails them (they count as not acknowledged).
func (lp *loadProducer) finish() ([]ack, time.Duration, []error) {
	lp.stop()
	select {
	case <-lp.done:
	case <-time.After(30 * time.Second):
		lp.abort()
		<-lp.done
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return slices.Clone(lp.acks), lp.maxGap, slices.Clone(lp.errs)
}

// readAll reads every partition of topic from the start to its end (as the cluster
// reports it now), from outside: a fresh client (with opts), no group.
func readAll(t *testing.T, bootstrap, topic string, opts ...kgo.Opt) map[int32]map[int64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, bootstrap, opts...))
	var ends kadm.ListedOffsets
	eventually(t, 30*time.Second, "end offsets of every partition", func() error {
		var err error
		if ends, err = adm.ListEndOffsets(ctx, topic); err == nil {
			err = ends.Error()
		}
		return err
	})
	want := map[int32]int64{}
	offs := map[string]map[int32]kgo.Offset{topic: {}}
	ends.Each(func(o kadm.ListedOffset) {
		want[o.Partition] = o.Offset
		offs[topic][o.Partition] = kgo.NewOffset().AtStart()
	})
	cl := client(t, bootstrap, append(slices.Clone(opts), kgo.ConsumePartitions(offs), kgo.FetchMaxWait(200*time.Millisecond))...)
	got := map[int32]map[int64]string{}
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back: %v (have %v, want %v)", topic, ctx.Err(), next, want)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("reading partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if got[r.Partition] == nil {
				got[r.Partition] = map[int64]string{}
			}
			got[r.Partition][r.Offset] = string(r.Value)
			next[r.Partition] = r.Offset + 1
		})
	}
	return got
}

// checkAcked fails t for every acknowledged record missing from, or changed in, the
// log, and for any value the log holds twice.
func checkAcked(t *testing.T, acks []ack, log map[int32]map[int64]string) {
	t.Helper()
	lost, dups, msgs := compareAcked(acks, log)
	for _, m := range msgs {
		t.Error(m)
	}
	if lost > 0 || dups > 0 {
		t.Fatalf("%d acknowledged records lost or changed, %d duplicates, of %d acknowledged", lost, dups, len(acks))
	}
}

// compareAcked counts the acknowledged records missing from (or changed in) the log
// and the values the log holds twice, with the first few of each described.
func compareAcked(acks []ack, log map[int32]map[int64]string) (lost, dups int, msgs []string) {
	for _, a := range acks {
		if v, ok := log[a.Partition][a.Offset]; !ok || v != a.Value {
			if lost < 10 {
				msgs = append(msgs, fmt.Sprintf("acknowledged %s at %d/%d: the log has %q (present %v)", a.Value, a.Partition, a.Offset, v, ok))
			}
			lost++
		}
	}
	seen := map[string]string{}
	for p, recs := range log {
		for off, v := range recs {
			at := fmt.Sprintf("%d/%d", p, off)
			if prev, dup := seen[v]; dup {
				if dups < 10 {
					msgs = append(msgs, fmt.Sprintf("value %s twice in the log: %s and %s", v, prev, at))
				}
				dups++
			}
			seen[v] = at
		}
	}
	return lost, dups, msgs
}
