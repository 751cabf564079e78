package runner

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos"
	"github.com/samsa-broker/samsa/tools/chaos/cluster"
)

// The replica monitor: every ReplicaInterval it reads, from each running node at once,
// /metrics (log ends, metadata offset), Metadata (ISR), ListOffsets (the HWs of the
// partitions it leads) and /metrics again, and hands the round to a
// chaos.ReplicaChecker; every finding is appended to the history at once, and its
// counts when it stops. Cost per round and node: two scrapes of /metrics, one
// Metadata and one ListOffsets of the watched topics, each bounded by a timeout (a
// paused node's requests time out; a stopped node is not asked).

// replicaTopics are the topics watched: the workload's and the internal ones that
// exist in the run (the others are simply absent from the answers).
func replicaTopics(cfg Config, txnTopic string) []string {
	ts := []string{cfg.Topic}
	if txnTopic != "" {
		ts = append(ts, txnTopic)
	}
	return append(ts, "__consumer_offsets", "__transaction_state")
}

type replicaMonitor struct {
	c        *cluster.Cluster
	hist     *chaos.Writer
	topics   []string
	want     map[string]bool
	interval time.Duration
	timeout  time.Duration
	check    *chaos.ReplicaChecker
	obs      map[int]*cluster.Observer
	failures int
	stop     context.CancelFunc
	done     chan struct{}
	printf   func(string, ...any)
}

// startReplicaMonitor starts the monitor; stop it with its stop method, which records
// its counts.
func startReplicaMonitor(ctx context.Context, c *cluster.Cluster, hist *chaos.Writer, topics []string, interval time.Duration, printf func(string, ...any)) (*replicaMonitor, error) {
	m := &replicaMonitor{c: c, hist: hist, topics: topics, want: map[string]bool{}, interval: interval, timeout: time.Second,
		check: chaos.NewReplicaChecker(len(c.Nodes())), obs: map[int]*cluster.Observer{}, done: make(chan struct{}), printf: printf}
	for _, t := range topics {
		m.want[t] = true
	}
	for _, n := range c.Nodes() {
		o, err := c.Observer(n, m.timeout)
		if err != nil {
			m.close()
			return nil, err
		}
		m.obs[n.ID] = o
	}
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.stop = cancel
	go m.loop(mctx)
	return m, nil
}

func (m *replicaMonitor) close() {
	for _, o := range m.obs {
		o.Close()
	}
}

// finish stops the monitor, records its counts in the history and returns them.
func (m *replicaMonitor) finish() chaos.ReplicaStats {
	m.stop()
	<-m.done
	m.close()
	st := m.check.Stats()
	st.Failures = m.failures
	now, wall := m.hist.Now()
	m.hist.Append(chaos.Op{Proc: chaos.ProcReplicas, F: chaos.FReplica, Status: chaos.OK, Start: now, End: now, Wall: wall,
		Replica: &chaos.ReplicaOp{Stats: &st}})
	return st
}

func (m *replicaMonitor) loop(ctx context.Context) {
	defer close(m.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		begun := time.Now()
		r := m.round(ctx)
		if ctx.Err() != nil {
			return // a round cut short by the stop is not judged
		}
		for _, f := range m.check.Round(r) {
			now, wall := m.hist.Now()
			m.hist.Append(chaos.Op{Proc: chaos.ProcReplicas, F: chaos.FReplica, Status: chaos.Fail, Start: f.LEOAt, End: now, Wall: wall,
				P: f.Partition, O: f.LEO, V: fmt.Sprintf("%s-%d replica %d", f.Topic, f.Partition, f.Replica), Err: f.Detail(),
				Replica: &chaos.ReplicaOp{Finding: &f}})
			m.printf("replica check: %s", f.Detail())
		}
		t.Reset(max(0, m.interval-time.Since(begun)))
	}
}

// nodeRound is what one node answered in a round.
type nodeRound struct {
	id       int
	s1, s2   cluster.Scrape
	md       cluster.MetadataAnswer
	hw       cluster.HWAnswer
	asked    bool
	failures int
}

// round asks every running node at once.
func (m *replicaMonitor) round(ctx context.Context) chaos.ReplicaRound {
	start, _ := m.hist.Now()
	var wg sync.WaitGroup
	var rs []*nodeRound
	for _, n := range m.c.Nodes() {
		if !n.Running() {
			continue
		}
		nr := &nodeRound{id: n.ID, asked: true}
		rs = append(rs, nr)
		o := m.obs[n.ID]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, 4*m.timeout)
			defer cancel()
			nr.s1 = o.Scrape(rctx, m.want)
			nr.md = o.Metadata(rctx, m.topics)
			if nr.md.Err == nil {
				var tps []cluster.TP
				for _, p := range nr.md.Parts {
					tps = append(tps, p.TP)
				}
				nr.hw = o.HighWatermarks(rctx, tps)
			}
			nr.s2 = o.Scrape(rctx, m.want)
			for _, err := range []error{nr.s1.Err, nr.md.Err, nr.hw.Err, nr.s2.Err} {
				if err != nil {
					nr.failures++
				}
			}
		}()
	}
	wg.Wait()
	end, _ := m.hist.Now()
	r := chaos.ReplicaRound{Start: start, End: end}
	since := m.hist.Since
	sort.Slice(rs, func(i, j int) bool { return rs[i].id < rs[j].id })
	for _, nr := range rs {
		m.failures += nr.failures
		if nr.md.Err == nil {
			a := chaos.ISRAnswer{Node: nr.id, Start: since(nr.md.Start), End: since(nr.md.End), OffLo: -1, OffHi: -1}
			// OffLo must be read before the request and OffHi after it; a failed
			// scrape leaves the side unknown.
			if nr.s1.Err == nil {
				a.OffLo = nr.s1.Applied
			}
			if nr.s2.Err == nil {
				a.OffHi = nr.s2.Applied
			}
			for _, p := range nr.md.Parts {
				a.Parts = append(a.Parts, chaos.PartitionISR{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Partition, Leader: p.Leader,
					Replicas: p.Replicas, ISR: p.ISR})
			}
			r.ISR = append(r.ISR, a)
		}
		if nr.hw.Err == nil {
			for tp, hw := range nr.hw.HW {
				r.HW = append(r.HW, chaos.HWReading{Node: nr.id, Start: since(nr.hw.Start), End: since(nr.hw.End), Topic: tp.Topic, Partition: tp.Partition, HW: hw})
			}
		}
		for _, s := range []cluster.Scrape{nr.s1, nr.s2} {
			if s.Err != nil {
				continue
			}
			for tp, leo := range s.LEO {
				r.LEO = append(r.LEO, chaos.LEOReading{Node: nr.id, Start: since(s.Start), End: since(s.End), Topic: tp.Topic, Partition: tp.Partition, LEO: leo})
			}
		}
	}
	sortRound(&r)
	return r
}

// sortRound orders a round's readings, so that a round is judged the same way
// whatever order the nodes answered in.
func sortRound(r *chaos.ReplicaRound) {
	sort.Slice(r.HW, func(i, j int) bool {
		a, b := r.HW[i], r.HW[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Node < b.Node
	})
	sort.Slice(r.LEO, func(i, j int) bool {
		a, b := r.LEO[i], r.LEO[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		return a.Start < b.Start
	})
}

// replicaCheckOff says why the replica check cannot run in this configuration ("" when
// it can): its premise is that a replica's log end never drops below what it
// reported to its leader, which holds under sync=fsync; under the other policies a
// power loss legitimately takes records a follower had reported.
func replicaCheckOff(cfg Config, power bool) string {
	for _, kv := range cfg.Set {
		k, v, _ := strings.Cut(kv, "=")
		if strings.TrimSpace(k) == "sync" && strings.TrimSpace(v) != "fsync" && power {
			return fmt.Sprintf("sync=%s with power losses: a follower may lose records it reported, which the check would take for a fault", strings.TrimSpace(v))
		}
	}
	return ""
}

// replicas is the run's monitor, nil when off; finishOnce stops it the first time.
type replicas struct {
	m    *replicaMonitor
	once sync.Once
}

func (x *replicas) finishOnce() (st chaos.ReplicaStats, ok bool) {
	if x == nil || x.m == nil {
		return st, false
	}
	x.once.Do(func() { st, ok = x.m.finish(), true })
	return st, ok
}

// startReplicas starts the replica monitor unless the run turns it off, recording why
// when it cannot run.
func (r *run) startReplicas(ctx context.Context, cfg Config, c *cluster.Cluster, hist *chaos.Writer, txnTopic string, power bool) *replicas {
	off := func(why string) *replicas {
		r.note("replica check off: %s", why)
		now, wall := hist.Now()
		hist.Append(chaos.Op{Proc: chaos.ProcReplicas, F: chaos.FReplica, Status: chaos.OK, Start: now, End: now, Wall: wall,
			Replica: &chaos.ReplicaOp{Stats: &chaos.ReplicaStats{Nodes: len(c.Nodes()), Note: why}}})
		return nil
	}
	if cfg.ReplicaInterval < 0 {
		return off("--replica-interval < 0")
	}
	if why := replicaCheckOff(cfg, power); why != "" {
		return off(why)
	}
	m, err := startReplicaMonitor(ctx, c, hist, replicaTopics(cfg, txnTopic), cfg.ReplicaInterval, r.printf)
	if err != nil {
		return off(err.Error())
	}
	r.printf("replica check: every %s, topics %s", cfg.ReplicaInterval, strings.Join(replicaTopics(cfg, txnTopic), ","))
	return &replicas{m: m}
}
