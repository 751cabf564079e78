package damage

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos/cluster"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Target is the replica damaged.
type Target string

const (
	// Single: the only node of a one-node cluster.
	Single Target = "single"
	// Follower: the follower of a partition with two replicas in a cluster of three
	// (the third node keeps the controller quorum's majority while the leader is down).
	Follower Target = "follower"
)

// Config is one scenario.
type Config struct {
	Bin    string
	Kind   Kind
	Target Target
	Dir    string // the scenario's directory (created)
	// Records written before the damage (default 4000) and, in a cluster, after the
	// damaged replica is back (default 500).
	Before, After int
	// Stall ends a read that makes no progress for this long (default 10s).
	Stall time.Duration
	// Set adds key=value config for every node (after the scenario's own).
	Set    []string
	Stdout io.Writer
}

// Result is what a scenario found.
type Result struct {
	Scenario string  `json:"scenario"`
	Applied  Applied `json:"applied"`
	Acked    int     `json:"acked"`
	// Damaged is the read from the damaged replica as leader; Consumer a franz-go
	// consumer's read at that time; Final (cluster) the read once the other replica is
	// back.
	Damaged  *Read    `json:"damaged"`
	Consumer Consumed `json:"consumer"`
	Final    *Read    `json:"final,omitempty"`
	// Lost: acknowledged values the last read did not return (Unavailable: those the
	// read from the damaged replica did not return).
	Lost        int      `json:"lost"`
	Unavailable int      `json:"unavailable"`
	Log         []string `json:"log"` // what the damaged node logged about the damage
	Pass        bool     `json:"pass"`
	Why         []string `json:"why"`   // what failed
	Notes       []string `json:"notes"` // what is worth knowing but no failure
	Took        time.Duration

	ackedOffsets map[int64]string
}

const topic = "damage"

// Run carries out one scenario. An error means it could not be carried out.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Before <= 0 {
		cfg.Before = 4000
	}
	if cfg.After <= 0 {
		cfg.After = 500
	}
	if cfg.Stall <= 0 {
		cfg.Stall = 10 * time.Second
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	s := &scenario{cfg: cfg, start: time.Now(), res: &Result{Scenario: string(cfg.Kind) + "/" + string(cfg.Target)}, nodes: 1,
		replicas: []int32{1}, acked: map[int64]string{}, leader: 1, victim: 1}
	if cfg.Target == Follower {
		s.nodes, s.replicas = 3, []int32{1, 2}
	} else if cfg.Target != Single {
		return nil, fmt.Errorf("damage: unknown target %q (single, follower)", cfg.Target)
	}
	defer s.close()
	if err := s.setUp(ctx); err != nil {
		return nil, err
	}
	vn, logFrom, err := s.damage(ctx)
	if err != nil {
		return nil, err
	}
	if s.nodes == 3 {
		if err := s.failOver(ctx); err != nil {
			return nil, err
		}
	}
	res := s.res
	res.Acked, res.ackedOffsets = len(s.acked), s.acked
	last, err := s.readBack(ctx)
	if err != nil {
		return nil, err
	}
	res.Lost = missing(s.acked, last.Values)
	res.Log = damageLines(vn.LogPath(), logFrom)
	judge(res, cfg.Target)
	res.Took = time.Since(s.start)
	return res, nil
}

// scenario is one run of Run: its cluster, client and the records acknowledged.
// With three nodes the partition has replicas 1 and 2; the victim is its follower.
type scenario struct {
	cfg            Config
	start          time.Time
	res            *Result
	nodes          int
	replicas       []int32
	c              *cluster.Cluster
	cl             *kgo.Client
	acked          map[int64]string
	leader, victim int
}

func (s *scenario) say(format string, args ...any) {
	fmt.Fprintf(s.cfg.Stdout, "[%6.2fs] %s: %s\n", time.Since(s.start).Seconds(), s.res.Scenario, fmt.Sprintf(format, args...))
}

func (s *scenario) close() {
	if s.cl != nil {
		s.cl.Close()
	}
	if s.c != nil {
		s.c.Close()
	}
}

// setUp starts the cluster (small segments, so that the first is sealed; small
// preallocated indexes), creates the topic, writes the records before the damage
// and, in a cluster, waits for both replicas in the ISR to learn the leader.
func (s *scenario) setUp(ctx context.Context) error {
	c, err := cluster.New(ctx, cluster.Config{Bin: s.cfg.Bin, Nodes: s.nodes, Dir: s.cfg.Dir, SessionTimeout: 6 * time.Second,
		Set: append([]string{"log.segment.bytes=65536", "log.index.size.max.bytes=262144"}, s.cfg.Set...)})
	if err != nil {
		return err
	}
	s.c = c
	if err := c.Start(ctx); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.MaxVersions(kversion.V2_8_0()), kgo.RetryTimeout(10*time.Second),
		kgo.DialTimeout(2*time.Second), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(8<<10), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return fmt.Errorf("damage: client: %w", err)
	}
	s.cl = cl
	if err := createTopic(ctx, cl, s.replicas); err != nil {
		return err
	}
	if err := produce(ctx, cl, "b", s.cfg.Before, s.acked); err != nil {
		return err
	}
	if s.nodes == 3 {
		st, err := waitPartition(ctx, cl, func(st partState) bool { return st.leader >= 0 && len(st.isr) == 2 })
		if err != nil {
			return err
		}
		s.leader = int(st.leader)
		s.victim = int(s.replicas[0] + s.replicas[1] - st.leader)
	}
	return nil
}

// damage stops the victim cleanly, damages its partition directory and restarts
// it. It returns the victim and the size of its log before the restart.
func (s *scenario) damage(ctx context.Context) (*cluster.Node, int64, error) {
	s.say("%d records acknowledged; leader %d, damaging node %d", len(s.acked), s.leader, s.victim)
	vn := s.c.Node(s.victim)
	if err := vn.Stop(20 * time.Second); err != nil {
		return nil, 0, fmt.Errorf("damage: stopping node %d: %w", s.victim, err)
	}
	logFrom := logSize(vn.LogPath())
	var err error
	s.res.Applied, err = Apply(PartitionDir(vn.LogDir, topic, 0), s.cfg.Kind)
	if err != nil {
		return nil, 0, err
	}
	s.say("node %d stopped cleanly; %s", s.victim, s.res.Applied.Detail)
	if err := vn.Restart(ctx); err != nil {
		return nil, 0, fmt.Errorf("damage: restarting node %d: %w", s.victim, err)
	}
	return vn, logFrom, nil
}

// failOver, in a cluster, waits for the damaged replica to rejoin the ISR, writes
// more records and stops the leader, so that the damaged replica leads.
func (s *scenario) failOver(ctx context.Context) error {
	res := s.res
	if _, err := waitPartition(ctx, s.cl, func(st partState) bool { return len(st.isr) == 2 }); err != nil {
		res.Why = append(res.Why, fmt.Sprintf("node %d did not rejoin the ISR: %v", s.victim, err))
	}
	if err := produce(ctx, s.cl, "a", s.cfg.After, s.acked); err != nil {
		res.Why = append(res.Why, fmt.Sprintf("writes after the damaged replica came back: %v", err))
	}
	ln := s.c.Node(s.leader)
	if err := ln.Stop(20 * time.Second); err != nil {
		return fmt.Errorf("damage: stopping node %d: %w", s.leader, err)
	}
	if _, err := waitPartition(ctx, s.cl, func(st partState) bool { return int(st.leader) == s.victim }); err != nil {
		res.Why = append(res.Why, fmt.Sprintf("node %d did not become the leader: %v", s.victim, err))
	}
	s.say("%d records acknowledged; leader %d stopped, node %d leads", len(s.acked), s.leader, s.victim)
	return nil
}

// readBack reads the partition from the damaged replica, raw and with a franz-go
// consumer, and in a cluster restarts the old leader and reads from the leader
// once both are in the ISR. It returns the last read.
func (s *scenario) readBack(ctx context.Context) (*Read, error) {
	res, cfg := s.res, s.cfg
	res.Damaged = rawRead(ctx, s.cl, s.victim, topic, 0, cfg.Stall)
	s.say("read from node %d: %s", s.victim, res.Damaged.Outcome())
	end := res.Damaged.End
	if end < 0 {
		end = maxKey(s.acked) + 1
	}
	res.Consumer = consume(ctx, s.c.Bootstrap(), topic, 0, end, cfg.Stall+5*time.Second)
	s.say("franz-go consumer: %s", res.Consumer.Outcome(end))
	res.Unavailable = missing(s.acked, res.Damaged.Values)
	if s.nodes != 3 {
		return res.Damaged, nil
	}
	if err := s.c.Node(s.leader).Restart(ctx); err != nil {
		return nil, fmt.Errorf("damage: restarting node %d: %w", s.leader, err)
	}
	st, err := waitPartition(ctx, s.cl, func(st partState) bool { return st.leader >= 0 && len(st.isr) == 2 })
	if err != nil {
		res.Why = append(res.Why, fmt.Sprintf("node %d did not rejoin the ISR: %v", s.leader, err))
	}
	res.Final = rawRead(ctx, s.cl, int(st.leader), topic, 0, cfg.Stall)
	s.say("node %d back; read from the leader %d: %s", s.leader, st.leader, res.Final.Outcome())
	return res.Final, nil
}

// judge fills Pass and Why: no read may stall or be served a corrupt batch; in a
// cluster nothing acknowledged may be lost; on one node the damaged batch may be lost
// (there is no other copy), but it must be refused with an error, not served.
func judge(res *Result, t Target) {
	for _, r := range []*Read{res.Damaged, res.Final} {
		if r == nil {
			continue
		}
		if r.Corrupt != "" {
			res.Why = append(res.Why, fmt.Sprintf("node %d served a damaged batch: %s", r.Leader, r.Corrupt))
		}
		if r.Stalled {
			res.Why = append(res.Why, fmt.Sprintf("the read from node %d stalled at offset %d of %d", r.Leader, r.Next, r.End))
		}
		if r.Err != "" {
			res.Why = append(res.Why, fmt.Sprintf("the read from node %d failed: %s", r.Leader, r.Err))
		}
	}
	// A consumer that waits without an error counts against the broker only when the
	// broker gave it nothing to act on: franz-go retries the retriable CORRUPT_MESSAGE
	// and KAFKA_STORAGE_ERROR without returning them (Notes says so).
	if !res.Consumer.Done && res.Consumer.Errors == 0 {
		if res.Damaged.ErrCode == "" {
			res.Why = append(res.Why, fmt.Sprintf("a franz-go consumer hung at offset %d without an error", res.Consumer.Next))
		} else {
			res.Notes = append(res.Notes, fmt.Sprintf("the franz-go consumer waits at offset %d without returning an error: it retries %s, retriable in Kafka's protocol", res.Consumer.Next, res.Damaged.ErrCode))
		}
	}
	if t == Follower {
		if res.Unavailable > 0 {
			res.Why = append(res.Why, fmt.Sprintf("%d acknowledged records not served while the damaged replica led", res.Unavailable))
		}
		if res.Lost > 0 {
			res.Why = append(res.Why, fmt.Sprintf("%d acknowledged records lost on the cluster", res.Lost))
		}
	} else if d := res.Damaged; d.ErrCode != "" && res.Applied.First >= 0 && d.Next > res.Applied.First {
		res.Why = append(res.Why, fmt.Sprintf("the refusal came at offset %d, past the damaged batch at %d", d.Next, res.Applied.First))
	} else if d.Complete() && res.Lost > 0 {
		// One copy only: a torn batch may go (logged); anything else read wrong or gone
		// without an error is a failure.
		beyond := 0
		for o := range res.ackedOffsets {
			if d.Values[o] != res.ackedOffsets[o] && (o < res.Applied.First || o > res.Applied.Last || res.Applied.Kind != TornTail) {
				beyond++
			}
		}
		if beyond > 0 {
			res.Why = append(res.Why, fmt.Sprintf("%d acknowledged records gone without an error", beyond))
		}
	}
	res.Pass = len(res.Why) == 0
}

func createTopic(ctx context.Context, cl *kgo.Client, replicas []int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = topic
	t.NumPartitions, t.ReplicationFactor = -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, replicas
	t.ReplicaAssignment = append(t.ReplicaAssignment, a)
	// min.insync.replicas=1: the repaired follower must serve every acknowledged record
	// when it leads alone. With eligible leader replicas (KIP-966, on in a cluster
	// formatted at 4.1) a leader's high watermark does not move while its ISR is below
	// min.insync.replicas (the cluster's 2), so records it had not yet learned were
	// committed would stay unserved until the other replica is back.
	mi := kmsg.NewCreateTopicsRequestTopicConfig()
	mi.Name, mi.Value = "min.insync.replicas", kmsg.StringPtr("1")
	t.Configs = append(t.Configs, mi)
	req.Topics = append(req.Topics, t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		}
		if err == nil || err == kerr.TopicAlreadyExists {
			_, err = waitPartition(ctx, cl, func(st partState) bool { return st.leader >= 0 && len(st.isr) == len(replicas) })
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("damage: create topic: %w", err)
		}
		sleep(ctx, 300*time.Millisecond)
	}
}

type partState struct {
	leader int32
	isr    []int32
}

// waitPartition polls Metadata for partition 0 until ok holds (60 s).
func waitPartition(ctx context.Context, cl *kgo.Client, ok func(partState) bool) (partState, error) {
	deadline := time.Now().Add(60 * time.Second)
	var last partState
	var lastErr error
	for {
		req := kmsg.NewPtrMetadataRequest()
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, t)
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := req.RequestWith(rctx, cl)
		cancel()
		lastErr = err
		if err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
			p := resp.Topics[0].Partitions[0]
			last = partState{leader: p.Leader, isr: p.ISR}
			if p.ErrorCode != 0 {
				last.leader = -1
			}
			if ok(last) {
				return last, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return last, fmt.Errorf("damage: partition state leader %d, ISR %v (last error %v)", last.leader, last.isr, lastErr)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// produce writes n values "<tag>-<i>" padded to 100 bytes, acks=all, and records the
// acknowledged offsets.
func produce(ctx context.Context, cl *kgo.Client, tag string, n int, acked map[int64]string) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	pad := strings.Repeat(".", 90)
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("%s-%d-%s", tag, i, pad)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Partition: 0, Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			acked[r.Offset] = v
		})
	}
	wg.Wait()
	if first != nil {
		return fmt.Errorf("damage: produce: %w", first)
	}
	return nil
}

// missing counts the acknowledged values a read did not return at their offsets.
func missing(acked, read map[int64]string) int {
	n := 0
	for o, v := range acked {
		if read[o] != v {
			n++
		}
	}
	return n
}

func maxKey(m map[int64]string) int64 {
	k := int64(-1)
	for o := range m {
		k = max(k, o)
	}
	return k
}

func logSize(path string) int64 {
	if st, err := os.Stat(path); err == nil {
		return st.Size()
	}
	return 0
}

// damageLines are the node's log lines since from that speak of damage, corruption,
// recovery or truncation (at most 12).
func damageLines(path string, from int64) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, from, 1<<30))
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		low := strings.ToLower(l)
		if slices.ContainsFunc([]string{"damage", "corrupt", "crc", "torn", "recover", "truncat", "rebuil", "index"}, func(w string) bool { return strings.Contains(low, w) }) &&
			!slices.ContainsFunc([]string{"msg=configuration", "component=raft", "component=quorum"}, func(w string) bool { return strings.Contains(low, w) }) {
			if len(l) > 400 {
				l = l[:400] + "..."
			}
			out = append(out, l)
			if len(out) == 12 {
				break
			}
		}
	}
	return out
}

// Table prints results as a table, one scenario a line, then each one's details.
func Table(w io.Writer, rs []*Result) {
	fmt.Fprintf(w, "%-22s %-5s %-7s %-6s %-11s %s\n", "scenario", "pass", "acked", "lost", "unavailable", "read from the damaged replica")
	for _, r := range rs {
		fmt.Fprintf(w, "%-22s %-5v %-7d %-6d %-11d %s\n", r.Scenario, r.Pass, r.Acked, r.Lost, r.Unavailable, r.Damaged.Outcome())
	}
	for _, r := range rs {
		fmt.Fprintf(w, "\n%s (%.0fs): %s\n", r.Scenario, r.Took.Seconds(), r.Applied.Detail)
		fmt.Fprintf(w, "  damaged replica as leader: %s\n", r.Damaged.Outcome())
		fmt.Fprintf(w, "  franz-go consumer: %s\n", r.Consumer.Outcome(r.Damaged.End))
		if r.Final != nil {
			fmt.Fprintf(w, "  after the other replica is back, from leader %d: %s\n", r.Final.Leader, r.Final.Outcome())
		}
		for _, why := range r.Why {
			fmt.Fprintf(w, "  FAIL: %s\n", why)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		for _, l := range r.Log {
			fmt.Fprintf(w, "  log: %s\n", l)
		}
	}
}

// Dir is the directory of one scenario under out.
func Dir(out string, k Kind, t Target) string {
	return filepath.Join(out, string(k)+"-"+string(t))
}
