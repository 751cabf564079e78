package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The failover timeline (issue 33): a three-node cluster, a topic of 6 partitions
// with RF 3 and min.insync.replicas=2, a producer with its client's default settings
// sending at a steady rate to every partition in turn, the leader of partition 0
// SIGKILLed every 8-11 s and restarted 3 s later, then the leader of partition 0
// SIGSTOPped for 20 s. Per fault, per partition, the longest time without an
// acknowledgement, and per fault kind their median and maximum.
//
//	SAMSA_FAILOVER=1 go test -count=1 -v -timeout 60m -run TestProcFailoverTimeline ./cmd/samsa
//
// Knobs (environment): SAMSA_FAILOVER_KILLS (20), SAMSA_FAILOVER_RATE (records/s of
// the producer, 4000), SAMSA_FAILOVER_CLIENTS (franz-go,librdkafka),
// SAMSA_FAILOVER_STOP (the SIGSTOP's length, 20s; 0 for none), SAMSA_FAILOVER_SEED,
// SAMSA_FAILOVER_VICTIM ("leader": the leader of partition 0; "controller": the
// active controller, which leads partitions of its own, so that every kill makes the
// controller quorum elect another leader first),
// SAMSA_FAILOVER_RDKAFKA_DEBUG (librdkafka's debug contexts, e.g. metadata,broker),
// SAMSA_FAILOVER_RDKAFKA_CONF (librdkafka settings over its defaults, as
// key=value,key=value: a control run with, say, reconnect.backoff.max.ms lowered),
// SAMSA_FAILOVER_FRANZ_MIN_AGE (franz-go's MetadataMinAge instead of its 5 s
// default, for a control run),
// SAMSA_FAILOVER_OUT (a directory for the acknowledgements, the client's log and the
// nodes' logs of each run). SAMSA_FAILOVER_REPORT=<a run's directory there> prints
// the report of that run again, from its acks.txt and events.txt.
//
// A measurement, not a check of a bound: it fails only on a lost acknowledged record.
// TestProcLeaderKillClientDefaults is the bounded test.

// failoverEvent is one fault or heal of the timeline.
type failoverEvent struct {
	At     time.Time
	Kind   string // "create", "kill", "restart", "stop", "cont"
	Victim int32
}

// failoverGap is a stretch of one partition without an acknowledgement.
type failoverGap struct {
	Partition  int32
	Start, End time.Time
}

func (g failoverGap) len() time.Duration { return g.End.Sub(g.Start) }

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

func TestProcFailoverTimeline(t *testing.T) {
	if dir := os.Getenv("SAMSA_FAILOVER_REPORT"); dir != "" {
		// The report of a recorded run again (its acks.txt and events.txt).
		acks, events, end, err := readFailoverRun(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(failoverReport(acks, events, 6, end))
		return
	}
	if os.Getenv("SAMSA_FAILOVER") == "" {
		t.Skip("a measurement of several minutes: set SAMSA_FAILOVER=1")
	}
	kills := envInt("SAMSA_FAILOVER_KILLS", 20)
	rate := envInt("SAMSA_FAILOVER_RATE", 4000)
	stop := 20 * time.Second
	if v := os.Getenv("SAMSA_FAILOVER_STOP"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		stop = d
	}
	seed := uint64(envInt("SAMSA_FAILOVER_SEED", 1))
	victim := cmp.Or(os.Getenv("SAMSA_FAILOVER_VICTIM"), "leader")
	if victim != "leader" && victim != "controller" {
		t.Fatalf("SAMSA_FAILOVER_VICTIM=%q: leader or controller", victim)
	}
	for _, name := range strings.Split(cmp.Or(os.Getenv("SAMSA_FAILOVER_CLIENTS"), "franz-go,librdkafka"), ",") {
		t.Run(name, func(t *testing.T) {
			var start func(t *testing.T, bootstrap, topic string, parts, rate int, logTo string) *loadProducer
			switch name {
			case "franz-go":
				start = startPacedFranz
			case "librdkafka":
				py := rdkafkaPython()
				if py == "" {
					t.Skip("no python3 with confluent_kafka")
				}
				start = func(t *testing.T, bootstrap, topic string, parts, rate int, logTo string) *loadProducer {
					return startPacedRdkafka(t, py, bootstrap, topic, parts, rate, logTo)
				}
			default:
				t.Fatalf("unknown client %q", name)
			}
			failoverTimeline(t, start, kills, rate, stop, seed, victim == "controller")
		})
	}
}

// failoverTimeline runs the schedule of TestProcFailoverTimeline with the producer
// start starts, and logs its figures. killController: each kill's victim is the
// active controller instead of partition 0's leader.
func failoverTimeline(t *testing.T, start func(t *testing.T, bootstrap, topic string, parts, rate int, logTo string) *loadProducer, kills, rate int, stop time.Duration, seed uint64, killController bool) {
	const parts = 6
	c := startProcCluster(t, combined(3))
	out := os.Getenv("SAMSA_FAILOVER_OUT")
	if out != "" {
		out = filepath.Join(out, strings.ReplaceAll(t.Name(), "/", "-"))
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var events []failoverEvent
	if err := createTopic(ctx, c.Node(1).Client, "fo", parts, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}); err != nil {
		t.Fatal(err)
	}
	events = append(events, failoverEvent{At: time.Now(), Kind: "create"})
	logTo := ""
	if out != "" {
		logTo = filepath.Join(out, "client.log")
	}
	lp := start(t, c.Bootstrap(), "fo", parts, rate, logTo)
	views := watchPartitions(t, c, "fo", parts)
	time.Sleep(10 * time.Second) // the load's warm-up: what the topic's first seconds cost
	rng := rand.New(rand.NewPCG(seed, 33))
	leaderOf0 := func(except int32) int32 {
		var leader int32 = -1
		eventually(t, 20*time.Second, "partition 0's leader", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			v, err := sameEverywhere(ctx, c.brokerAddrs(except), "fo", parts)
			if err != nil {
				return err
			}
			if leader = v[0].Leader; leader < 0 {
				return errors.New("no leader")
			}
			return nil
		})
		return leader
	}
	controller := func() int32 {
		var id int32 = -1
		eventually(t, 20*time.Second, "the active controller", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			id = -1
			for _, a := range c.brokerAddrs() {
				resp, err := metadataOf(ctx, a, "fo")
				if err != nil {
					return err
				}
				if resp.ControllerID < 0 || id >= 0 && resp.ControllerID != id {
					return fmt.Errorf("%s names controller %d, another %d", a, resp.ControllerID, id)
				}
				id = resp.ControllerID
			}
			return nil
		})
		return id
	}
	for range kills {
		victim := leaderOf0(-1)
		if killController {
			victim = controller()
		}
		events = append(events, failoverEvent{At: time.Now(), Kind: "kill", Victim: victim})
		c.Kill(victim)
		time.Sleep(3 * time.Second)
		if err := c.Start(victim); err != nil {
			t.Fatal(err)
		}
		events = append(events, failoverEvent{At: time.Now(), Kind: "restart", Victim: victim})
		time.Sleep(5*time.Second + time.Duration(rng.Int64N(int64(3*time.Second))))
	}
	if stop > 0 {
		// Every node back and unfenced first: a stop right after a restart measures the
		// restart too.
		time.Sleep(5 * time.Second)
		victim := leaderOf0(-1)
		events = append(events, failoverEvent{At: time.Now(), Kind: "stop", Victim: victim})
		if err := c.Signal(victim, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(stop)
		if err := c.Signal(victim, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		events = append(events, failoverEvent{At: time.Now(), Kind: "cont", Victim: victim})
		time.Sleep(10 * time.Second)
	}
	end := time.Now()
	acks, _, errs := lp.finish()
	changes := views()
	log := readAll(t, c.Bootstrap(), "fo")
	lost, dups, msgs := compareAcked(acks, log)
	for _, m := range msgs {
		t.Log(m)
	}
	t.Logf("%d acknowledged, %d lost, %d duplicated, %d errors", len(acks), lost, dups, len(errs))
	if lost > 0 {
		t.Errorf("%d acknowledged records lost", lost)
	}
	if out != "" {
		f, err := os.Create(filepath.Join(out, "acks.txt"))
		if err == nil {
			w := bufio.NewWriter(f)
			for _, a := range acks {
				fmt.Fprintf(w, "%d %d %d\n", a.At.UnixNano(), a.Partition, a.Offset)
			}
			w.Flush()
			f.Close()
		}
		for _, n := range c.nodes {
			b, _ := os.ReadFile(filepath.Join(n.Dir, "samsa.log"))
			os.WriteFile(filepath.Join(out, fmt.Sprintf("node%d.log", n.ID)), b, 0o644)
		}
		var ev strings.Builder
		for _, e := range events {
			fmt.Fprintf(&ev, "%s %s %d\n", e.At.UTC().Format(time.RFC3339Nano), e.Kind, e.Victim)
		}
		fmt.Fprintf(&ev, "%s end 0\n", end.UTC().Format(time.RFC3339Nano))
		os.WriteFile(filepath.Join(out, "events.txt"), []byte(ev.String()), 0o644)
		var pv strings.Builder
		for _, ch := range changes {
			fmt.Fprintf(&pv, "%s %+.3f p%d leader %d epoch %d isr %v (from node %d)\n", ch.At.UTC().Format(time.RFC3339Nano),
				ch.At.Sub(events[0].At).Seconds(), ch.Partition, ch.Leader, ch.Epoch, ch.ISR, ch.From)
		}
		os.WriteFile(filepath.Join(out, "partitions.txt"), []byte(pv.String()), 0o644)
	}
	t.Log(failoverReport(acks, events, parts, end))
}

// failoverGaps returns, per partition, every stretch longer than min without an
// acknowledgement between from and to (from and to count as acknowledgements).
func failoverGaps(acks []ack, parts int, from, to time.Time, min time.Duration) []failoverGap {
	at := make([][]time.Time, parts)
	for _, a := range acks {
		if int(a.Partition) < parts && !a.At.Before(from) && !a.At.After(to) {
			at[a.Partition] = append(at[a.Partition], a.At)
		}
	}
	var out []failoverGap
	for p, ts := range at {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		last := from
		for _, x := range append(ts, to) {
			if x.Sub(last) > min {
				out = append(out, failoverGap{Partition: int32(p), Start: last, End: x})
			}
			last = x
		}
	}
	slices.SortFunc(out, func(a, b failoverGap) int { return a.Start.Compare(b.Start) })
	return out
}

// failoverReport lays out the timeline: per event, the gaps over 500 ms that began in
// its window (from 100 ms before it: a request in flight at a kill was acknowledged
// just before), the longest of them (its no-ack time), and per kind of event the
// median and maximum of those.
func failoverReport(acks []ack, events []failoverEvent, parts int, end time.Time) string {
	const slack = 100 * time.Millisecond
	gaps := failoverGaps(acks, parts, events[0].At, end, 0)
	var b strings.Builder
	byKind := map[string][]time.Duration{}
	var kinds []string
	t0 := events[0].At
	for i, e := range events {
		next := end
		if i+1 < len(events) {
			next = events[i+1].At
		}
		var longest time.Duration
		var lines []string
		for _, g := range gaps {
			if g.Start.Before(e.At.Add(-slack)) && i > 0 || !g.Start.Before(next.Add(-slack)) {
				continue
			}
			longest = max(longest, g.len())
			if g.len() < 500*time.Millisecond {
				continue
			}
			lines = append(lines, fmt.Sprintf("p%d %+.2f..%+.2f (%.2f s)", g.Partition, g.Start.Sub(e.At).Seconds(), g.End.Sub(e.At).Seconds(), g.len().Seconds()))
		}
		if _, ok := byKind[e.Kind]; !ok {
			kinds = append(kinds, e.Kind)
		}
		byKind[e.Kind] = append(byKind[e.Kind], longest)
		fmt.Fprintf(&b, "%7.2f s %-7s node %d: no-ack %.2f s; %s\n", e.At.Sub(t0).Seconds(), e.Kind, e.Victim, longest.Seconds(), strings.Join(lines, ", "))
	}
	b.WriteString("per kind (no-ack of a fault: the longest time any partition went without an acknowledgement in its window):\n")
	for _, k := range kinds {
		ds := slices.Clone(byKind[k])
		slices.Sort(ds)
		med := ds[len(ds)/2]
		if len(ds)%2 == 0 {
			med = (ds[len(ds)/2-1] + ds[len(ds)/2]) / 2
		}
		fmt.Fprintf(&b, "  %-7s n=%-3d median %.2f s, max %.2f s\n", k, len(ds), med.Seconds(), ds[len(ds)-1].Seconds())
	}
	return b.String()
}

// startPacedFranz produces rate records a second, to partition i mod parts, with a
// franz-go client at its defaults (acks=all, idempotent, MetadataMinAge 5 s unless
// SAMSA_FAILOVER_FRANZ_MIN_AGE says otherwise, MaxBufferedRecords 10,000); only the
// partition of each record is chosen. logTo
// receives the client's log at info level ("": none).
func startPacedFranz(t *testing.T, bootstrap, topic string, parts, rate int, logTo string) *loadProducer {
	t.Helper()
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if v := os.Getenv("SAMSA_FAILOVER_FRANZ_MIN_AGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, kgo.MetadataMinAge(d))
	}
	if logTo != "" {
		f, err := os.Create(logTo)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		var mu sync.Mutex
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(lockedFile{f, &mu}, kgo.LogLevelInfo, func() string {
			return time.Now().UTC().Format("15:04:05.000000 ")
		})))
	}
	cl := client(t, bootstrap, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	lp := &loadProducer{stop: cancel, abort: cl.Close, done: make(chan struct{}), lastAck: time.Now()}
	go func() {
		defer close(lp.done)
		var wg sync.WaitGroup
		begin := time.Now()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		i := 0
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
			for due := int(time.Since(begin).Seconds() * float64(rate)); i < due && ctx.Err() == nil; i++ {
				wg.Add(1)
				cl.Produce(ctx, &kgo.Record{Partition: int32(i % parts), Value: []byte(fmt.Sprintf("v-%08d", i))}, lp.produced(&wg))
			}
		}
		wg.Wait()
	}()
	return lp
}

// lockedFile serializes the client's log lines.
type lockedFile struct {
	f  *os.File
	mu *sync.Mutex
}

func (l lockedFile) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(b)
}

// rdkafkaPaced is rdkafkaProducer at a rate (argv[3] records a second, to partition i
// mod argv[4]), every setting at its default but bootstrap.servers (and debug, only
// logging, when argv[5] names contexts, and the key=value,... settings of argv[6], for
// control runs). It writes librdkafka's own log lines to stderr.
const rdkafkaPaced = `
import select, sys, time
from confluent_kafka import Producer
conf = {"bootstrap.servers": sys.argv[1]}
if sys.argv[5]:
    conf["debug"] = sys.argv[5]
for kv in filter(None, sys.argv[6].split(",")):
    k, v = kv.split("=", 1)
    conf[k] = v
p = Producer(conf)
topic, rate, parts = sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
out = sys.stdout
def delivered(err, msg):
    if err is None:
        out.write("ok %d %d %s %d\n" % (msg.partition(), msg.offset(), msg.value().decode(), time.time_ns()))
    else:
        out.write("err %s\n" % err)
i = 0
begin = time.monotonic()
while True:
    r, _, _ = select.select([sys.stdin], [], [], 0)
    if r and not sys.stdin.read(1):
        break
    due = int((time.monotonic() - begin) * rate)
    while i < due:
        try:
            p.produce(topic, ("v-%08d" % i).encode(), partition=i % parts, callback=delivered)
        except BufferError:
            break
        i += 1
    p.poll(0.001)
    out.flush()
p.flush(30)
out.flush()
`

// startPacedRdkafka is startPacedFranz with librdkafka (confluent-kafka-python).
func startPacedRdkafka(t *testing.T, py, bootstrap, topic string, parts, rate int, logTo string) *loadProducer {
	t.Helper()
	cmd := exec.Command(py, "-c", rdkafkaPaced, bootstrap, topic, strconv.Itoa(rate), strconv.Itoa(parts), os.Getenv("SAMSA_FAILOVER_RDKAFKA_DEBUG"), os.Getenv("SAMSA_FAILOVER_RDKAFKA_CONF"))
	return runRdkafkaLoad(t, cmd, logTo)
}

// readFailoverRun reads the acknowledgements and events a run wrote to dir.
func readFailoverRun(dir string) (acks []ack, events []failoverEvent, end time.Time, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "events.txt"))
	if err != nil {
		return nil, nil, end, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, nil, end, fmt.Errorf("events.txt: %q", line)
		}
		at, err := time.Parse(time.RFC3339Nano, f[0])
		if err != nil {
			return nil, nil, end, err
		}
		victim, _ := strconv.Atoi(f[2])
		if f[1] == "end" {
			end = at
			continue
		}
		events = append(events, failoverEvent{At: at, Kind: f[1], Victim: int32(victim)})
	}
	f, err := os.Open(filepath.Join(dir, "acks.txt"))
	if err != nil {
		return nil, nil, end, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ns, off int64
		var p int32
		if _, err := fmt.Sscan(sc.Text(), &ns, &p, &off); err != nil {
			return nil, nil, end, err
		}
		acks = append(acks, ack{Partition: p, Offset: off, At: time.Unix(0, ns)})
	}
	if end.IsZero() && len(acks) > 0 {
		end = acks[len(acks)-1].At
		for _, a := range acks {
			end = later(end, a.At)
		}
	}
	return acks, events, end, sc.Err()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// partitionChange is a change of a partition's leader, leader epoch or ISR as a
// broker's Metadata showed it.
type partitionChange struct {
	At            time.Time
	Partition     int32
	Leader, Epoch int32
	ISR           []int32
	From          int32 // the broker asked
}

// watchPartitions asks a running broker for topic's Metadata every 100 ms and keeps
// every change it sees; the returned func stops it and returns them.
func watchPartitions(t *testing.T, c *procCluster, topic string, parts int) func() []partitionChange {
	done := make(chan struct{})
	var out []partitionChange
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		last := map[int32]partitionChange{}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ids := c.Brokers()
			id := ids[i%len(ids)]
			if !c.Running(id) {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			resp, err := metadataOf(ctx, c.Node(id).Client, topic)
			cancel()
			if err != nil {
				continue
			}
			now := time.Now()
			for _, rt := range resp.Topics {
				for _, p := range rt.Partitions {
					isr := slices.Clone(p.ISR)
					slices.Sort(isr)
					ch := partitionChange{At: now, Partition: p.Partition, Leader: p.Leader, Epoch: p.LeaderEpoch, ISR: isr, From: id}
					if l, ok := last[p.Partition]; ok && (l.Epoch > ch.Epoch || l.Epoch == ch.Epoch && slices.Equal(l.ISR, ch.ISR) && l.Leader == ch.Leader) {
						continue // a broker behind the last one asked, or no change
					}
					last[p.Partition] = ch
					out = append(out, ch)
				}
			}
		}
	}()
	return func() []partitionChange {
		close(done)
		<-stopped
		return out
	}
}
